// The plan (core/plan.h, core/planner.h): a start for every pending gang,
// conservative backfill, and the properties the plan promises, over random
// fleets and queues.
#include "core/plan.h"

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/scheduler.h"
#include "core/testing.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using testing::kT0;
using testing::MakeNodes;
using testing::MakeQueue;
using testing::Spec;
using testing::WithEstimate;

class PlanTest : public testing::SchedulerFixture {
 protected:
  void Init(Config config, int blocks, int racks, int nodes) {
    config.topology_levels = {"block", "rack"};
    config.preemption.enabled = false;
    config.reservation.depth = 0;  // the plan alone
    config.planning.binding = true;
    SchedulerFixture::Init(config, MakeNodes(blocks, racks, nodes),
                           {MakeQueue("a"), MakeQueue("b")});
  }
  // Starts a random trial: a fleet of 1–2 blocks, 1–3 racks, 1–4 nodes a
  // rack, fair share off (the order is priority, then age).
  void StartTrial(std::mt19937& rng) {
    now_ = kT0;
    Config config;
    config.fair_share.enabled = false;
    // Drawn one at a time: the order a call's arguments are evaluated in
    // is the compiler's choice, and the fleets must not depend on it.
    const int blocks = Pick(rng, 1, 2);
    const int racks = Pick(rng, 1, 3);
    const int nodes = Pick(rng, 1, 4);
    Init(config, blocks, racks, nodes);
  }
  static int Pick(std::mt19937& rng, int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  }
  // Submits a random gang of `priority` with an exact estimate of 10 min to
  // 8 h, up to half the fleet; 8-GPU gangs REQUIRED in a rack when
  // `racks`; appends it to `gangs` when accepted (it may never fit).
  void SubmitRandom(std::mt19937& rng, int priority, bool racks,
                    std::vector<GangPtr>& gangs) {
    const int nodes = static_cast<int>(scheduler_->fleet().slots().size());
    const int gpus = std::vector<int>{1, 2, 4, 8}[Pick(rng, 0, 3)];
    Spec spec(Pick(rng, 0, 1) == 0 ? "a" : "b");
    spec.Pods(Pick(rng, 1, std::max(1, nodes * 8 / gpus / 2)), gpus)
        .Priority(priority);
    if (racks && gpus == 8 && Pick(rng, 0, 2) == 0) spec.Required("rack");
    auto result = scheduler_->Submit(
        WithEstimate(spec, absl::Minutes(Pick(rng, 1, 48) * 10)), now_);
    if (result.ok()) gangs.push_back(result->gang);
  }
  // Reports every running gang whose estimate has run out SUCCEEDED.
  void FinishDue() {
    for (const auto& [id, gang] : scheduler_->gangs()) {
      if (!HoldsCapacity(gang->state) || !gang->admit_time) continue;
      if (*gang->admit_time + gang->spec.estimated_runtime > now_) continue;
      ASSERT_TRUE(
          scheduler_->Report({id, GangState::kSucceeded, {}, false, ""}, now_)
              .ok());
    }
  }
  // The earliest end of a running gang after now_, or InfiniteFuture.
  absl::Time NextEnd() const {
    absl::Time next = absl::InfiniteFuture();
    for (const auto& [id, gang] : scheduler_->gangs()) {
      if (HoldsCapacity(gang->state) && gang->admit_time) {
        next = std::min(next, *gang->admit_time + gang->spec.estimated_runtime);
      }
    }
    return next;
  }
  // Checks that no pending gang of `gangs` is planned later than it was at
  // the last call (`latest`, updated), or than now if that start has come.
  void ExpectNoPlannedStartLater(const std::vector<GangPtr>& gangs,
                                 std::map<GangId, absl::Time>& latest) const {
    for (const GangPtr& gang : gangs) {
      const PlannedStart planned = scheduler_->PlanOf(gang->id);
      if (planned.status != PlanStatus::kPlanned) continue;
      auto [it, first] = latest.try_emplace(gang->id, planned.start);
      // A start that came between two cycles is now.
      EXPECT_LE(planned.start, std::max(it->second, now_))
          << gang->id.value() << " moved from " << absl::FormatTime(it->second)
          << " to " << absl::FormatTime(planned.start);
      it->second = planned.start;
    }
  }
  // Whether the plan leaves every node at least 0 free GPUs at all times:
  // GPUs free now, plus those running gangs free at their expected ends,
  // less those planned gangs take while they run.
  void ExpectNoNodeOverbooked() const {
    const Fleet& fleet = scheduler_->fleet();
    std::vector<std::map<absl::Time, int>> deltas(fleet.slots().size());
    for (const auto& [id, gang] : scheduler_->gangs()) {
      if (!HoldsCapacity(gang->state)) continue;
      const absl::Time end =
          std::max(*gang->admit_time + gang->spec.estimated_runtime,
                   now_ + scheduler_->config().cycle_interval);
      for (const PodPlacement& pod : gang->placement) {
        deltas[fleet.Find(pod.node)][end] +=
            static_cast<int>(pod.gpu_indices.size());
      }
    }
    for (const Plan::Entry& entry : scheduler_->plan().entries()) {
      for (const Plan::Use& use : entry.uses) {
        deltas[use.slot][entry.start] -= use.gpus;
        deltas[use.slot][entry.end] += use.gpus;
      }
    }
    for (size_t slot = 0; slot < deltas.size(); ++slot) {
      int free = fleet.slots()[slot].FreeGpus();
      for (const auto& [time, delta] : deltas[slot]) {
        free += delta;
        ASSERT_GE(free, 0) << "slot " << slot << " at "
                           << absl::FormatTime(time);
      }
    }
  }
};

// Two racks of two 8-GPU nodes, all busy until 1 h, 2 h, 3 h and 4 h: the
// gangs behind them each get a start and a rack, in order.
TEST_F(PlanTest, EveryGangBehindAFullFleetHasAStartAndADomain) {
  Init(Config{}, 1, 2, 2);
  GangPtr one_hour = Submit(
      WithEstimate(Spec("a").Pods(2, 8).Required("rack"), absl::Hours(1)));
  Submit(WithEstimate(Spec("a").Pods(2, 8).Required("rack"), absl::Hours(3)));
  Cycle();
  const absl::Time t = now_;
  const Fleet& fleet = scheduler_->fleet();
  const std::string rack =
      fleet.slots()[fleet.Find(Get(one_hour)->placement[0].node)]
          .node.spec.labels.at("rack");
  GangPtr first = Submit(
      WithEstimate(Spec("b").Pods(2, 8).Required("rack"), absl::Hours(1)));
  GangPtr second = Submit(
      WithEstimate(Spec("b").Pods(2, 8).Required("rack"), absl::Hours(1)));
  GangPtr any = Submit(WithEstimate(Spec("b").Pods(1, 8), absl::Hours(1)));
  Cycle();
  const PlannedStart a = scheduler_->PlanOf(first->id);
  const PlannedStart b = scheduler_->PlanOf(second->id);
  const PlannedStart c = scheduler_->PlanOf(any->id);
  ASSERT_EQ(a.status, PlanStatus::kPlanned);
  ASSERT_EQ(b.status, PlanStatus::kPlanned);
  ASSERT_EQ(c.status, PlanStatus::kPlanned);
  EXPECT_EQ(a.start, t + absl::Hours(1));  // the 1 h rack
  EXPECT_EQ(a.domain, "b0/" + rack);
  EXPECT_EQ(b.start, t + absl::Hours(2));  // the same rack, after the first
  EXPECT_EQ(b.domain, "b0/" + rack);
  EXPECT_EQ(c.start, t + absl::Hours(3));  // a node frees at 3 h
  EXPECT_EQ(a.rank, 1);
  EXPECT_EQ(scheduler_->PlanOf(GangId("g-000001")).status,
            PlanStatus::kNotPending);
  auto explanation = scheduler_->Explain(first->id);
  ASSERT_TRUE(explanation.ok());
  EXPECT_EQ(explanation->plan, a);
}

// A gang that would delay a planned start does not start now; one that
// ends before it (backfill) does; without an estimate it may not.
TEST_F(PlanTest, TableBackfillNeverDelaysAPlannedStart) {
  struct Case {
    std::string name;
    absl::Duration estimate;  // 0 = none
    bool starts;
  } cases[] = {
      {"ends before the planned start", absl::Minutes(30), true},
      {"would run past it", absl::Hours(3), false},
      {"no estimate", absl::ZeroDuration(), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    now_ = kT0;
    Init(Config{}, 1, 1, 2);
    Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(1)));
    Cycle();
    GangPtr wide = Submit(WithEstimate(Spec("a").Pods(2, 8), absl::Hours(1)));
    Cycle();
    ASSERT_EQ(scheduler_->PlanOf(wide->id).status, PlanStatus::kPlanned);
    GangPtr small = Submit(WithEstimate(Spec("b").Pods(1, 8), c.estimate));
    Cycle();
    EXPECT_EQ(StateOf(small) == GangState::kAdmitted, c.starts)
        << Get(small)->reason;
    if (!c.starts) {
      EXPECT_EQ(Get(small)->reason_code, ReasonCode::kBlockedByReservation);
    }
  }
}

// A gang the plan has not seen yet passes planned gangs of lower priority
// (the next plan would put it first), not those of its own priority.
TEST_F(PlanTest, TableANewGangPassesOnlyLowerPriorityPlans) {
  for (const int priority : {0, 1}) {
    SCOPED_TRACE(priority);
    now_ = kT0;
    Config config;
    config.planning.interval = absl::Hours(1);  // no re-plan in between
    config.reservation.depth = 0;               // the plan alone
    Init(config, 1, 1, 2);
    Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(1)));
    Cycle();
    Submit(WithEstimate(Spec("a").Pods(2, 8), absl::Hours(1)));
    Cycle();
    GangPtr late = Submit(Spec("b").Pods(1, 8).Priority(priority));
    Cycle();
    EXPECT_EQ(StateOf(late) == GangState::kAdmitted, priority > 0);
  }
}

TEST_F(PlanTest, GangsBeyondTheDepthOrTheWindowSaySo) {
  Config config;
  config.planning.max_gangs = 2;
  config.planning.window = absl::Hours(5);
  Init(config, 1, 1, 1);
  Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(4)));
  Cycle();
  GangPtr soon = Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(4)));
  GangPtr late = Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(4)));
  GangPtr deep = Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(4)));
  Cycle();
  EXPECT_EQ(scheduler_->PlanOf(soon->id).status, PlanStatus::kPlanned);
  EXPECT_EQ(scheduler_->PlanOf(late->id).status, PlanStatus::kBeyondWindow);
  EXPECT_EQ(scheduler_->PlanOf(deep->id).status, PlanStatus::kBeyondDepth);
}

// A node removed between two plans: the new plan keeps nothing of the old
// one's nodes (the gang that needed all four no longer fits on three).
TEST(PlanAloneTest, APlanMadeOnASmallerFleetKeepsNoStaleNode) {
  Fleet fleet({"block", "rack"});
  std::vector<Node> nodes = MakeNodes(1, 1, 4);
  fleet.Upsert(nodes);
  Gang whole;
  whole.id = GangId("g-whole");
  whole.spec = Spec("a").Pods(4, 8);
  Plan plan;
  PlanningConfig config;
  Plan::Request request;
  request.gang = &whole;
  request.runtime = absl::Hours(1);
  plan.Reset(fleet, {}, kT0, config);
  ASSERT_EQ(plan.Add(request, fleet, kT0).status, PlanStatus::kPlanned);
  ASSERT_TRUE(fleet.Remove(nodes.back().spec.id));
  plan.Reset(fleet, {}, kT0, config);
  EXPECT_EQ(plan.Add(request, fleet, kT0).status, PlanStatus::kNeverFits);
}

// Gangs of one shape planned one after another: a later one that runs at
// least as long starts no earlier than the last (its search begins there),
// a shorter one still fills a hole before that, and a gang dropped from the
// plan gives its place back.
TEST(PlanAloneTest, GangsOfOneShapeStillFillHolesAndRegainDroppedCapacity) {
  Fleet fleet({"block", "rack"});
  fleet.Upsert(MakeNodes(1, 1, 2));
  Plan plan;
  plan.Reset(fleet, {}, kT0, PlanningConfig());
  std::vector<std::unique_ptr<Gang>> gangs;
  auto add = [&](const std::string& id, int pods, absl::Duration runtime) {
    gangs.push_back(std::make_unique<Gang>());
    gangs.back()->id = GangId(id);
    gangs.back()->spec = Spec("a").Pods(pods, 8);
    Plan::Request request;
    request.gang = gangs.back().get();
    request.runtime = runtime;
    const PlannedStart planned = plan.Add(request, fleet, kT0);
    EXPECT_EQ(planned.status, PlanStatus::kPlanned) << id;
    return planned.start - kT0;
  };
  EXPECT_EQ(add("a", 1, absl::Hours(2)), absl::ZeroDuration());
  EXPECT_EQ(add("both", 2, absl::Hours(4)), absl::Hours(2));
  // One node is free for 2 h: too short for 10 h, long enough for 1 h.
  EXPECT_EQ(add("long-1", 1, absl::Hours(10)), absl::Hours(6));
  EXPECT_EQ(add("short", 1, absl::Hours(1)), absl::ZeroDuration());
  EXPECT_EQ(add("long-2", 1, absl::Hours(10)), absl::Hours(6));
  EXPECT_EQ(add("long-3", 1, absl::Hours(10)), absl::Hours(16));
  plan.Drop(GangId("long-1"));
  EXPECT_EQ(add("long-4", 1, absl::Hours(10)), absl::Hours(6));
}

// Over random fleets and queues with exact runtimes and no new arrivals,
// with the plan binding: the plan never overbooks a node at any time, every
// gang gets through, and each starts at the first start planned for it.
TEST_F(PlanTest, PropertyNoOverbookingAndEveryGangStartsAsFirstPlanned) {
  std::mt19937 rng(20261206);
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE(trial);
    StartTrial(rng);
    std::vector<GangPtr> gangs;
    for (int i = 0, n = Pick(rng, 4, 24); i < n; ++i) {
      SubmitRandom(rng, Pick(rng, 0, 2), /*racks=*/true, gangs);
    }
    std::map<GangId, absl::Time> first_start;
    std::map<GangId, absl::Time> latest_start;
    for (int step = 0; step < 200; ++step) {
      scheduler_->RunCycle(now_);
      ExpectNoNodeOverbooked();
      ExpectNoPlannedStartLater(gangs, latest_start);
      for (const GangPtr& gang : gangs) {
        const PlannedStart planned = scheduler_->PlanOf(gang->id);
        if (planned.status == PlanStatus::kPlanned) {
          first_start.emplace(gang->id, planned.start);
        }
      }
      const absl::Time next = NextEnd();
      if (next == absl::InfiniteFuture()) break;
      now_ = next;
      FinishDue();
    }
    for (const GangPtr& gang : gangs) {
      EXPECT_TRUE(IsFinal(Get(gang)->state)) << gang->id.value();
      auto it = first_start.find(gang->id);
      if (it != first_start.end() && Get(gang)->admit_time) {
        EXPECT_EQ(*Get(gang)->admit_time, it->second)
            << gang->id.value() << " started at "
            << absl::FormatTime(*Get(gang)->admit_time) << ", first planned at "
            << absl::FormatTime(it->second);
      }
    }
  }
}

// Over random fleets and queues with exact runtimes, gangs arriving while
// others wait at the lowest priority (so behind them in admission order)
// never move a planned start later, and never start on capacity planned
// for a gang ahead of them.
TEST_F(PlanTest, PropertyGangsBehindNeverDelayAPlannedStart) {
  std::mt19937 rng(20261207);
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE(trial);
    StartTrial(rng);
    std::vector<GangPtr> gangs;
    for (int i = 0, n = Pick(rng, 4, 16); i < n; ++i) {
      SubmitRandom(rng, Pick(rng, 1, 2), /*racks=*/false, gangs);
    }
    std::map<GangId, absl::Time> latest_start;
    // Steps of at most an hour: a one-node fleet drains its gangs (up to
    // 8 h each, one at a time) in a few hundred.
    for (int step = 0; step < 2000; ++step) {
      scheduler_->RunCycle(now_);
      ExpectNoNodeOverbooked();
      ExpectNoPlannedStartLater(gangs, latest_start);
      const absl::Time next = NextEnd();
      if (next == absl::InfiniteFuture()) break;
      now_ = std::min(next, now_ + absl::Minutes(Pick(rng, 5, 60)));
      FinishDue();
      if (step < 60 && Pick(rng, 0, 1) == 0) {
        SubmitRandom(rng, 0, /*racks=*/false, gangs);
      }
    }
    for (const GangPtr& gang : gangs) {
      EXPECT_TRUE(IsFinal(Get(gang)->state)) << gang->id.value();
    }
  }
}

}  // namespace
}  // namespace phalanx::core
