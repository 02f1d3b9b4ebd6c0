// Elastic gangs: admission at the largest size that fits, growth onto
// freed capacity, shrink instead of preemption (core/elastic.h,
// core/resizer.h).
#include "core/elastic.h"

#include <map>
#include <set>
#include <string>

#include "core/memory_store.h"
#include "core/reservation.h"
#include "core/testing.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using testing::kT0;
using testing::MakeNodes;
using testing::MakeQueue;
using testing::Spec;
using testing::WithEstimate;

class ElasticTest : public testing::SchedulerFixture {
 protected:
  void Init(Config config, int nodes, int nodes_per_rack = 0) {
    config.topology_levels = {"block", "rack"};
    testing::SchedulerFixture::Init(
        config,
        MakeNodes(1, nodes_per_rack == 0 ? 1 : nodes / nodes_per_rack,
                  nodes_per_rack == 0 ? nodes : nodes_per_rack),
        {MakeQueue("q")});
  }
  static Config Grow(absl::Duration interval = absl::Minutes(10)) {
    Config config;
    config.elastic.grow_interval = interval;
    return config;
  }
  void Running(const GangPtr& gang) {
    GangReport report;
    report.gang_id = gang->id;
    report.state = GangState::kRunning;
    ASSERT_TRUE(scheduler_->Report(report, now_).ok());
  }
  void Finish(const GangPtr& gang) {
    GangReport report;
    report.gang_id = gang->id;
    report.state = GangState::kSucceeded;
    ASSERT_TRUE(scheduler_->Report(report, now_).ok());
  }
  int64_t HeldGpus() const {
    const auto held = scheduler_->Usage(QueueName("q")).held_gpus;
    return held.contains("H100") ? held.at("H100") : 0;
  }
  // Every GPU of the fleet is held by at most one pod, and the fleet's
  // free GPUs plus the placements' add up to its size.
  void ExpectNoGpuHeldTwice() const {
    std::set<std::pair<std::string, int>> seen;
    int64_t placed = 0;
    for (const auto& [id, gang] : scheduler_->gangs()) {
      if (!HoldsCapacity(gang->state)) continue;
      for (const PodPlacement& pod : gang->placement) {
        for (int gpu : pod.gpu_indices) {
          EXPECT_TRUE(seen.insert({pod.node.value(), gpu}).second)
              << pod.node.value() << " GPU " << gpu;
          ++placed;
        }
      }
    }
    int64_t free = 0;
    int64_t total = 0;
    for (const Fleet::Slot& slot : scheduler_->fleet().slots()) {
      free += slot.FreeGpus();
      total += slot.node.spec.gpu_count;
    }
    EXPECT_EQ(free + placed, total);
  }
};

TEST_F(ElasticTest, AdmitsAtTheLargestSizeThatFits) {
  Init({}, 4);
  GangPtr blocker = Submit(Spec("q").Pods(1, 8));
  Cycle();
  GangPtr elastic = Submit(Spec("q").Pods(4, 8, "w").Elastic(2));
  Cycle();
  const GangPtr admitted = Get(elastic);
  ASSERT_EQ(admitted->state, GangState::kAdmitted);
  ASSERT_EQ(admitted->placement.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(admitted->placement[i].index, i);
  EXPECT_EQ(HeldGpus(), 32);  // the blocker's 8 and its 24
  ExpectNoGpuHeldTwice();
}

TEST_F(ElasticTest, AFixedGangIsUnchanged) {
  Init({}, 4);
  Submit(Spec("q").Pods(1, 8));
  Cycle();
  GangPtr fixed = Submit(Spec("q").Pods(4, 8, "w"));
  Cycle();
  EXPECT_EQ(StateOf(fixed), GangState::kPending);
}

TEST_F(ElasticTest, WaitsWhenItsMinimumDoesNotFit) {
  Init({}, 4);
  Submit(Spec("q").Pods(3, 8));
  Cycle();
  GangPtr elastic = Submit(Spec("q").Pods(4, 8, "w").Elastic(2));
  Cycle();
  const GangPtr pending = Get(elastic);
  EXPECT_EQ(pending->state, GangState::kPending);
  EXPECT_NE(pending->reason.find("at its minimum, 2 pods of w"),
            std::string::npos)
      << pending->reason;
}

TEST_F(ElasticTest, DryRunShowsTheSizeItWouldStartAt) {
  Init({}, 4);
  Submit(Spec("q").Pods(1, 8));
  Cycle();
  auto placement = scheduler_->DryRun(Spec("q").Pods(4, 8, "w").Elastic(2));
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_TRUE(placement->placed);
  EXPECT_EQ(placement->pods.size(), 3u);
  auto none = scheduler_->DryRun(Spec("q").Pods(4, 8, "w").Elastic(4));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->placed);
}

TEST_F(ElasticTest, SubmitChecksTheMinimumAgainstTheFleet) {
  Init({}, 4);
  auto elastic = scheduler_->Submit(Spec("q").Pods(8, 8).Elastic(4), now_);
  EXPECT_TRUE(elastic.ok()) << elastic.status();
  auto fixed = scheduler_->Submit(Spec("q").Pods(8, 8), now_);
  EXPECT_EQ(fixed.status().code(), absl::StatusCode::kFailedPrecondition);
  auto too_big = scheduler_->Submit(Spec("q").Pods(9, 8).Elastic(5), now_);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ElasticTest, BadMinimumsNameTheField) {
  Init({}, 4);
  struct Case {
    GangSpec spec;
    std::string error;
  };
  const Case cases[] = {
      {Spec("q").Pods(4, 8).Elastic(5),
       "spec.pod_sets[0].min_count: must be 0 (fixed size) or in 1..count (4)"},
      {Spec("q").Pods(4, 8).Elastic(-1), "spec.pod_sets[0].min_count: must be"},
      {Spec("q").Pods(4, 8).Slices(2, "rack").Elastic(3),
       "spec.pod_sets[0].min_count: must be a multiple of slice.size (2)"},
      {Spec("q").Pods(4, 8).Elastic(2).Pods(2, 8).Elastic(1),
       "spec.pod_sets[1].min_count: only one pod set of a gang may be "
       "elastic; pod_sets[0] already is"},
  };
  for (const Case& c : cases) {
    auto result = scheduler_->Submit(c.spec, now_);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(result.status().message().find(c.error), std::string::npos)
        << result.status();
  }
  EXPECT_TRUE(scheduler_->gangs().empty());
}

TEST_F(ElasticTest, GrowsOntoFreedCapacityAfterItsInterval) {
  Init(Grow(absl::Minutes(10)), 4);
  GangPtr blocker = Submit(Spec("q").Pods(2, 8));
  Cycle();
  GangPtr elastic = Submit(Spec("q").Pods(4, 8, "w").Elastic(1));
  Cycle();
  Running(elastic);
  ASSERT_EQ(Get(elastic)->placement.size(), 2u);
  Finish(blocker);
  Cycle(absl::Minutes(5));  // too soon
  EXPECT_EQ(Get(elastic)->placement.size(), 2u);
  const int64_t revision = scheduler_->revision();
  Cycle(absl::Minutes(6));
  const GangPtr grown = Get(elastic);
  EXPECT_EQ(grown->state, GangState::kRunning);
  ASSERT_EQ(grown->placement.size(), 4u);
  EXPECT_EQ(grown->placement[2].index, 2);
  EXPECT_EQ(grown->placement[3].index, 3);
  EXPECT_EQ(grown->resizes, 1);
  EXPECT_EQ(grown->last_resize_time, now_);
  EXPECT_GT(grown->revision, revision);
  EXPECT_EQ(HeldGpus(), 32);
  ExpectNoGpuHeldTwice();
  bool resized = false;
  for (const Event& event : scheduler_->TakeMutation().events) {
    resized |=
        event.type == EventType::kResized && event.gang->id == elastic->id;
  }
  EXPECT_TRUE(resized);
}

TEST_F(ElasticTest, ItsExpectedEndCountsTheWorkDoneBeforeEachResize) {
  Init(Grow(absl::Hours(2)), 4);
  GangPtr blocker = Submit(Spec("q").Pods(2, 8));
  Cycle();
  const absl::Time start = now_ + absl::Seconds(1);
  GangPtr elastic = Submit(
      WithEstimate(Spec("q").Pods(4, 8, "w").Elastic(1), absl::Hours(4)));
  Cycle();
  Running(elastic);
  // At half size its four hours of work take eight.
  EXPECT_EQ(ExpectedEnd(*Get(elastic), now_), start + absl::Hours(8));
  Finish(blocker);
  CycleAt(start + absl::Hours(2));  // grows to 4 pods after 1 h of work
  const GangPtr grown = Get(elastic);
  ASSERT_EQ(grown->placement.size(), 4u);
  EXPECT_EQ(grown->elastic_work_done, absl::Hours(1));
  EXPECT_EQ(ExpectedEnd(*grown, now_), start + absl::Hours(5));
}

TEST_F(ElasticTest, DoesNotGrowWhileAPendingGangCouldTakeTheCapacity) {
  Init(Grow(absl::ZeroDuration()), 4);
  GangPtr blocker = Submit(Spec("q").Pods(2, 8));
  Cycle();
  GangPtr elastic = Submit(Spec("q").Pods(4, 8, "w").Elastic(1));
  Cycle();
  Running(elastic);
  ASSERT_EQ(Get(elastic)->placement.size(), 2u);
  // A pending gang is offered the capacity first.
  GangPtr waiting = Submit(Spec("q").Pods(2, 8));
  Finish(blocker);
  Cycle();
  EXPECT_EQ(StateOf(waiting), GangState::kAdmitted);
  EXPECT_EQ(Get(elastic)->placement.size(), 2u);
}

TEST_F(ElasticTest, GrowthStaysInTheDomainItsTopologyRequires) {
  Init(Grow(absl::ZeroDuration()), 4, /*nodes_per_rack=*/2);
  GangPtr rack = Submit(Spec("q").Pods(2, 8).Required("rack"));
  Cycle();
  GangPtr one = Submit(Spec("q").Pods(1, 8));
  Cycle();
  GangPtr elastic =
      Submit(Spec("q").Pods(2, 8, "w").Elastic(1).Required("rack"));
  Cycle();
  Running(elastic);
  ASSERT_EQ(Get(elastic)->placement.size(), 1u);
  // A whole rack frees, but not in its rack: it stays at one pod.
  Finish(rack);
  Cycle();
  EXPECT_EQ(Get(elastic)->placement.size(), 1u);
  // Its rack frees: it grows there.
  Finish(one);
  Cycle();
  const GangPtr grown = Get(elastic);
  ASSERT_EQ(grown->placement.size(), 2u);
  auto rack_of = [this](const PodPlacement& pod) {
    const int slot = scheduler_->fleet().Find(pod.node);
    return scheduler_->fleet().slots()[slot].node.spec.labels.at("rack");
  };
  EXPECT_EQ(rack_of(grown->placement[0]), rack_of(grown->placement[1]));
  ExpectNoGpuHeldTwice();
}

TEST_F(ElasticTest, SlicesStayWholeOnAdmissionAndGrowth) {
  Init(Grow(absl::ZeroDuration()), 6, /*nodes_per_rack=*/2);
  GangPtr blocker = Submit(Spec("q").Pods(3, 8));
  Cycle();
  GangPtr elastic =
      Submit(Spec("q").Pods(6, 8, "w").Slices(2, "rack").Elastic(2));
  Cycle();
  Running(elastic);
  // Three nodes are free but only one whole rack: one slice of two.
  const GangPtr admitted = Get(elastic);
  ASSERT_EQ(admitted->placement.size(), 2u);
  Finish(blocker);
  Cycle();
  EXPECT_EQ(Get(elastic)->placement.size(), 6u);
  ExpectNoGpuHeldTwice();
}

class ElasticShrinkTest : public ElasticTest {
 protected:
  // Four nodes; a low-priority elastic gang of 4 (down to `min`) running on
  // all of them for 11 minutes (past preemption.min_runtime).
  GangPtr RunElastic(int min) {
    Config config = testing::PreemptionConfig();
    config.elastic.grow_interval = absl::Hours(100);
    Init(config, 4);
    GangPtr elastic = Submit(Spec("q").Pods(4, 8, "w").Elastic(min));
    Cycle();
    Running(elastic);
    Cycle(absl::Minutes(11));
    return elastic;
  }
  void Acknowledge(const GangPtr& gang) {
    GangReport report;
    report.gang_id = gang->id;
    report.preemption_acknowledged = true;
    report.last_checkpoint_time = now_;
    ASSERT_TRUE(scheduler_->Report(report, now_).ok());
  }
};

TEST_F(ElasticShrinkTest, ShrinksForAHigherPriorityGangInsteadOfStopping) {
  GangPtr elastic = RunElastic(2);
  GangPtr urgent = Submit(Spec("q").Pods(2, 8).Priority(5));
  Cycle();
  const GangPtr shrinking = Get(elastic);
  ASSERT_EQ(shrinking->state, GangState::kPreempting);
  EXPECT_EQ(shrinking->shrink_to, 2);
  EXPECT_NE(shrinking->reason.find("shrinking to 2 pods"), std::string::npos);
  EXPECT_EQ(StateOf(urgent), GangState::kPending);
  Acknowledge(elastic);
  const GangPtr shrunk = Get(elastic);
  EXPECT_EQ(shrunk->state, GangState::kRunning);
  ASSERT_EQ(shrunk->placement.size(), 2u);
  EXPECT_EQ(shrunk->placement[0].index, 0);
  EXPECT_EQ(shrunk->placement[1].index, 1);
  EXPECT_EQ(shrunk->shrink_to, 0);
  EXPECT_FALSE(shrunk->grace_deadline.has_value());
  EXPECT_EQ(shrunk->preemptions, 0);
  EXPECT_EQ(shrunk->resizes, 1);
  EXPECT_EQ(shrunk->last_checkpoint_time, now_);
  Cycle();
  EXPECT_EQ(StateOf(urgent), GangState::kAdmitted);
  EXPECT_EQ(HeldGpus(), 32);
  ExpectNoGpuHeldTwice();
}

TEST_F(ElasticShrinkTest, AShrinkEndsAtTheGraceDeadlineWithoutAnAck) {
  GangPtr elastic = RunElastic(2);
  GangPtr urgent = Submit(Spec("q").Pods(1, 8).Priority(5));
  Cycle();
  ASSERT_EQ(StateOf(elastic), GangState::kPreempting);
  Cycle(absl::Minutes(5));
  const GangPtr shrunk = Get(elastic);
  EXPECT_EQ(shrunk->state, GangState::kRunning);
  EXPECT_EQ(shrunk->placement.size(), 2u);
  Cycle();
  EXPECT_EQ(StateOf(urgent), GangState::kAdmitted);
  ExpectNoGpuHeldTwice();
}

TEST_F(ElasticShrinkTest, IsStoppedWholeWhenAShrinkIsNotEnough) {
  GangPtr elastic = RunElastic(3);
  GangPtr urgent = Submit(Spec("q").Pods(2, 8).Priority(5));
  Cycle();
  const GangPtr preempting = Get(elastic);
  ASSERT_EQ(preempting->state, GangState::kPreempting);
  EXPECT_EQ(preempting->shrink_to, 0);
  Acknowledge(elastic);
  EXPECT_EQ(StateOf(elastic), GangState::kPending);
  EXPECT_EQ(Get(elastic)->preemptions, 1);
}

TEST_F(ElasticShrinkTest, AShrunkGangSurvivesARestart) {
  GangPtr elastic = RunElastic(2);
  Submit(Spec("q").Pods(2, 8).Priority(5));
  Cycle();
  Acknowledge(elastic);
  Cycle();
  MemoryStore store;
  ASSERT_TRUE(store.Commit(scheduler_->TakeMutation()).ok());
  auto restored = Scheduler::Restore(*store.LoadAll(), now_);
  ASSERT_TRUE(restored.ok()) << restored.status();
  const GangPtr back = (*restored)->FindGang(elastic->id);
  EXPECT_EQ(back->placement, Get(elastic)->placement);
  EXPECT_EQ(back->resizes, 1);
}

TEST_F(ElasticShrinkTest, ARestoreRefusesASizeTheSpecDoesNotAllow) {
  Init({}, 4);
  GangPtr elastic = Submit(Spec("q").Pods(4, 8, "w").Elastic(3));
  Cycle();
  Gang gang = *Get(elastic);
  gang.placement.resize(2);  // below its minimum
  LoadedState state;
  state.config = Config{};
  for (const Fleet::Slot& slot : scheduler_->fleet().slots()) {
    state.nodes.push_back(slot.node);
  }
  state.queues.push_back(MakeQueue("q"));
  state.gangs.push_back(gang);
  auto restored = Scheduler::Restore(std::move(state), now_);
  ASSERT_FALSE(restored.ok());
  EXPECT_NE(restored.status().message().find("2 of 4 pods placed"),
            std::string::npos)
      << restored.status();
}

TEST_F(ElasticShrinkTest, AnElasticPreemptorMakesRoomForItsMinimumOnly) {
  Config config = testing::PreemptionConfig();
  Init(config, 4);
  GangPtr first = Submit(Spec("q").Pods(2, 8));
  GangPtr second = Submit(Spec("q").Pods(2, 8));
  Cycle();
  Running(first);
  Running(second);
  Cycle(absl::Minutes(11));
  GangPtr elastic = Submit(Spec("q").Pods(4, 8, "w").Elastic(2).Priority(5));
  Cycle();
  const int preempting = (StateOf(first) == GangState::kPreempting) +
                         (StateOf(second) == GangState::kPreempting);
  EXPECT_EQ(preempting, 1);
  const GangPtr victim =
      StateOf(first) == GangState::kPreempting ? first : second;
  Acknowledge(victim);
  Cycle();
  const GangPtr admitted = Get(elastic);
  EXPECT_EQ(admitted->state, GangState::kAdmitted);
  EXPECT_EQ(admitted->placement.size(), 2u);
  ExpectNoGpuHeldTwice();
}

TEST(ElasticSizesTest, RuntimeStretchesWithFewerPods) {
  GangSpec spec = Spec("q").Pods(8, 8).Elastic(2);
  EXPECT_EQ(RuntimeAtSize(spec, 8, absl::Hours(2)), absl::Hours(2));
  EXPECT_EQ(RuntimeAtSize(spec, 4, absl::Hours(2)), absl::Hours(4));
  EXPECT_EQ(RuntimeAtSize(spec, 2, absl::Hours(2)), absl::Hours(8));
  GangSpec fixed = Spec("q").Pods(8, 8);
  EXPECT_EQ(RuntimeAtSize(fixed, 2, absl::Hours(2)), absl::Hours(2));
  EXPECT_EQ(MinimumSpec(spec).pod_sets[0].count, 2);
  EXPECT_FALSE(IsElastic(MinimumSpec(spec)));
}

}  // namespace
}  // namespace phalanx::core
