// The fair-share order's wait bound (admission.fair_share_wait_bound): a
// gang pending longer than the bound ranks ahead of every gang of its
// priority still within it, by submit time, whatever its queue's score.
// Table tests: which gang a cycle admits, and that the bound holds against
// a stream of later gangs from a lighter queue.
#include <string>

#include "core/scheduler.h"
#include "core/testing.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using testing::kT0;
using testing::MakeNodes;
using testing::Spec;

constexpr absl::Duration kOff = absl::InfiniteDuration();

class FairOrderTest : public testing::SchedulerFixture {
 protected:
  void Init(absl::Duration wait_bound, int nodes) {
    Config config;
    config.admission.fair_share_wait_bound = wait_bound;
    config.preemption.enabled = false;
    config.reservation.depth = 0;
    config.topology_levels = {"block", "rack"};
    SchedulerFixture::Init(config, MakeNodes(1, 1, nodes),
                           {testing::MakeQueue("a"), testing::MakeQueue("b")});
  }
  // Fills both 8-GPU nodes with gangs of queue a, so a's score is the
  // higher; returns the one that will end.
  GangPtr FillWithHeavyQueue() {
    Submit(Spec("a").Pods(1, 8));
    GangPtr ends = Submit(Spec("a").Pods(1, 8));
    Cycle();
    EXPECT_EQ(StateOf(ends), GangState::kAdmitted);
    return ends;
  }
};

// Two 8-GPU nodes held by queue a. Waiting for the one that frees: a gang
// of a (the heavier queue) and a gang of b, submitted at the offsets and
// priorities below; the cycle runs 3 h after the start. Whoever goes first
// takes the node, and the other no longer fits.
TEST_F(FairOrderTest, TableWhichGangGoesFirst) {
  struct Case {
    std::string name;
    absl::Duration bound;
    absl::Duration heavy_submitted, light_submitted;  // after the start
    int heavy_priority, light_priority;
    bool heavy_first;
  } cases[] = {
      {"bound off: the lighter queue first", kOff, absl::ZeroDuration(),
       absl::Hours(3), 0, 0, false},
      {"heavy gang 3 h pending, bound 2 h: it goes first", absl::Hours(2),
       absl::ZeroDuration(), absl::Hours(3), 0, 0, true},
      {"heavy gang 3 h pending, bound 4 h: score decides", absl::Hours(4),
       absl::ZeroDuration(), absl::Hours(3), 0, 0, false},
      {"both past the bound, heavy submitted first: submit order",
       absl::Hours(1), absl::ZeroDuration(), absl::Minutes(30), 0, 0, true},
      {"both past the bound, light submitted first: submit order",
       absl::Hours(1), absl::Minutes(30), absl::ZeroDuration(), 0, 0, false},
      {"past the bound, but the light gang has the higher priority",
       absl::Hours(2), absl::ZeroDuration(), absl::Hours(3), 0, 1, false},
      {"past the bound with the higher priority", absl::Hours(2),
       absl::ZeroDuration(), absl::Hours(3), 1, 0, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    now_ = kT0;
    Init(c.bound, 2);
    GangPtr ends = FillWithHeavyQueue();
    const absl::Time start = now_;
    GangPtr heavy, light;
    auto submit_due = [&](absl::Time until) {
      if (heavy == nullptr && start + c.heavy_submitted <= until) {
        now_ = start + c.heavy_submitted;
        heavy = Submit(Spec("a").Pods(1, 8).Priority(c.heavy_priority));
      }
      if (light == nullptr && start + c.light_submitted <= until) {
        now_ = start + c.light_submitted;
        light = Submit(Spec("b").Pods(1, 4).Priority(c.light_priority));
      }
    };
    submit_due(start + std::min(c.heavy_submitted, c.light_submitted));
    submit_due(start + std::max(c.heavy_submitted, c.light_submitted));
    ASSERT_NE(heavy, nullptr);
    ASSERT_NE(light, nullptr);
    now_ = start + absl::Hours(3);
    ASSERT_TRUE(scheduler_->Cancel(ends->id, "test", now_).ok());
    CycleAt(now_);
    EXPECT_EQ(StateOf(heavy) == GangState::kAdmitted, c.heavy_first);
    EXPECT_EQ(StateOf(light) == GangState::kAdmitted, !c.heavy_first);
  }
}

// Queue a holds both nodes; its 8-GPU gang waits. Every hour one node
// frees and queue b (lighter) submits a new 8-GPU gang just before. Without
// a bound b's newer gang takes every freed node; with a bound of B hours
// a's gang takes the first node freed after it has waited B hours.
TEST_F(FairOrderTest, TableTheBoundEndsBeingOvertaken) {
  struct Case {
    std::string name;
    absl::Duration bound;
    int admitted_at_hour;  // 0: still pending after 10 h
  } cases[] = {
      {"bound off: overtaken every hour", kOff, 0},
      {"bound 3 h: first node freed after 3 h", absl::Hours(3), 4},
      {"bound 30 min: the first node freed", absl::Minutes(30), 1},
      {"bound 7 h 30 min", absl::Hours(7) + absl::Minutes(30), 8},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    now_ = kT0;
    Init(c.bound, 2);
    GangPtr running = FillWithHeavyQueue();
    const absl::Time start = now_;
    GangPtr waiting = Submit(Spec("a").Pods(1, 8));
    int admitted_at_hour = 0;
    for (int hour = 1; hour <= 10 && admitted_at_hour == 0; ++hour) {
      now_ = start + absl::Hours(hour) - absl::Seconds(1);
      GangPtr newer = Submit(Spec("b").Pods(1, 8));
      now_ = start + absl::Hours(hour);
      ASSERT_TRUE(scheduler_->Cancel(running->id, "test", now_).ok());
      CycleAt(now_);
      if (StateOf(waiting) == GangState::kAdmitted) {
        admitted_at_hour = hour;
        EXPECT_EQ(StateOf(newer), GangState::kPending);
      } else {
        EXPECT_EQ(StateOf(newer), GangState::kAdmitted);
      }
      // The gang admitted now is the one that ends next hour.
      running = StateOf(newer) == GangState::kAdmitted ? newer : waiting;
    }
    EXPECT_EQ(admitted_at_hour, c.admitted_at_hour);
  }
}

// Explain places a gang where a cycle at the given time would take it: the
// heavy queue's gang, pending past the bound, is first then; without a time
// the bound is left out and the lighter queue's gang is first.
TEST_F(FairOrderTest, ExplainCountsTheBoundFromTheTimeGiven) {
  now_ = kT0;
  Init(absl::Hours(2), 2);
  FillWithHeavyQueue();
  GangPtr heavy = Submit(Spec("a").Pods(1, 8));
  now_ += absl::Hours(3);
  GangPtr light = Submit(Spec("b").Pods(1, 8));
  auto timeless = scheduler_->Explain(heavy->id);
  auto at_now = scheduler_->Explain(heavy->id, now_);
  ASSERT_TRUE(timeless.ok());
  ASSERT_TRUE(at_now.ok());
  EXPECT_EQ(timeless->position, 2);
  EXPECT_EQ(at_now->position, 1);
  EXPECT_EQ(scheduler_->Explain(light->id, now_)->position, 2);
}

}  // namespace
}  // namespace phalanx::core
