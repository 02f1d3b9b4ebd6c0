// Admission policy: quotas, fair sharing, ordering modes, strict FIFO, first
// fit and the capacity-epoch skip.
#include <string>

#include "core/memory_store.h"
#include "core/scheduler.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::HasSubstr;
using testing::kT0;
using testing::MakeNodes;
using testing::MakeQueue;
using ::testing::Not;
using testing::Spec;
using ::testing::StartsWith;

// 4 nodes x 8 H100 GPUs (one block, two racks) and the given queues.
class AdmissionTest : public testing::SchedulerFixture {
 protected:
  void Init(Config config, const std::vector<Queue>& queues) {
    config.topology_levels = {"block", "rack"};
    SchedulerFixture::Init(config, MakeNodes(1, 2, 2), queues);
  }
  std::string ReasonOf(const GangPtr& gang) { return Get(gang)->reason; }
};

TEST_F(AdmissionTest, NominalQuotaWithoutCohortIsAHardLimit) {
  Init({}, {MakeQueue("q", 8)});
  GangPtr first = Submit(Spec("q").Pods(1, 8));
  GangPtr second = Submit(Spec("q").Pods(1, 8));
  Cycle();
  EXPECT_EQ(StateOf(first), GangState::kAdmitted);
  EXPECT_EQ(StateOf(second), GangState::kPending);
  EXPECT_THAT(ReasonOf(second), StartsWith("QUOTA: queue q would hold 8 H100"));
}

TEST_F(AdmissionTest, BorrowsIdleQuotaOfItsCohortWithinLimits) {
  Queue lender = MakeQueue("lender", 16, "cohort");
  lender.lending_limit_gpus = 8;
  Init({}, {MakeQueue("cohort"), MakeQueue("borrower", 8, "cohort"), lender});
  GangPtr big = Submit(Spec("borrower").Pods(2, 8));  // 8 nominal + 8 lent
  GangPtr more = Submit(Spec("borrower").Pods(1, 8));
  Cycle();
  EXPECT_EQ(StateOf(big), GangState::kAdmitted);
  EXPECT_EQ(StateOf(more), GangState::kPending);
  EXPECT_THAT(ReasonOf(more),
              HasSubstr("cohort cohort lends 8 and 8 are borrowed"));
  // The lender still gets its own nominal quota.
  GangPtr own = Submit(Spec("lender").Pods(1, 8));
  Cycle();
  EXPECT_EQ(StateOf(own), GangState::kAdmitted);
}

TEST_F(AdmissionTest, QueueWithLessUsageGoesFirstAndHeldCountsAtOnce) {
  Init({}, {MakeQueue("a"), MakeQueue("b")});
  // "a" submits a burst first; "b" submits later. With 4 nodes and fair
  // sharing recomputed after each admission, they alternate.
  std::vector<GangPtr> a, b;
  for (int i = 0; i < 3; ++i) a.push_back(Submit(Spec("a").Pods(1, 8)));
  now_ += absl::Seconds(1);
  for (int i = 0; i < 3; ++i) b.push_back(Submit(Spec("b").Pods(1, 8)));
  Cycle();
  EXPECT_EQ(StateOf(a[0]), GangState::kAdmitted);
  EXPECT_EQ(StateOf(a[1]), GangState::kAdmitted);
  EXPECT_EQ(StateOf(a[2]), GangState::kPending);
  EXPECT_EQ(StateOf(b[0]), GangState::kAdmitted);
  EXPECT_EQ(StateOf(b[1]), GangState::kAdmitted);
}

TEST_F(AdmissionTest, DecayedUsageMakesAHeavyQueueWait) {
  Init({}, {MakeQueue("heavy"), MakeQueue("light")});
  GangPtr hog = Submit(Spec("heavy").Pods(4, 8));
  Cycle();
  now_ += absl::Hours(48);
  ASSERT_TRUE(scheduler_->Cancel(hog->id, "", now_).ok());
  GangPtr heavy = Submit(Spec("heavy").Pods(4, 8));
  now_ += absl::Seconds(1);
  GangPtr light = Submit(Spec("light").Pods(4, 8));
  Cycle();
  EXPECT_EQ(StateOf(light), GangState::kAdmitted);
  EXPECT_EQ(StateOf(heavy), GangState::kPending);
  EXPECT_GT(scheduler_->quotas().ledger().DecayedUsage(QueueName("heavy")),
            5.0);
}

TEST_F(AdmissionTest, WeightZeroQueueGoesLast) {
  Init({}, {MakeQueue("zero", -1, "", 0.0), MakeQueue("busy")});
  GangPtr zero = Submit(Spec("zero").Pods(4, 8));
  GangPtr busy = Submit(Spec("busy").Pods(4, 8));
  Cycle();
  EXPECT_EQ(StateOf(busy), GangState::kAdmitted);
  EXPECT_EQ(StateOf(zero), GangState::kPending);
}

TEST_F(AdmissionTest, StrictFifoLetsNothingPassTheHead) {
  Config config;
  config.admission.ordering = Ordering::kSubmitOrder;
  config.admission.strict_fifo = true;
  Init(config, {MakeQueue("q")});
  GangPtr filler = Submit(Spec("q").Pods(2, 8));
  GangPtr head = Submit(Spec("q").Pods(3, 8));
  GangPtr small = Submit(Spec("q").Pods(1, 8));
  Cycle();
  EXPECT_EQ(StateOf(filler), GangState::kAdmitted);
  EXPECT_EQ(StateOf(head), GangState::kPending);
  EXPECT_EQ(StateOf(small), GangState::kPending);
  // The cycle stopped at the head; the gang behind it says so.
  EXPECT_EQ(ReasonOf(small), "WAITING: strict FIFO: behind gang " +
                                 head->id.value() + ", which does not fit");
}

TEST_F(AdmissionTest, BestEffortSkipsTheHeadThatDoesNotFit) {
  Config config;
  config.reservation.depth = 0;  // without a reservation for the head
  Init(config, {MakeQueue("q")});
  GangPtr filler = Submit(Spec("q").Pods(2, 8));
  GangPtr head = Submit(Spec("q").Pods(3, 8));
  GangPtr small = Submit(Spec("q").Pods(1, 8));
  Cycle();
  EXPECT_EQ(StateOf(head), GangState::kPending);
  EXPECT_EQ(StateOf(small), GangState::kAdmitted);
}

TEST_F(AdmissionTest, FirstFitTakesTheLowestNodes) {
  Config config;
  config.placement.first_fit = true;
  Init(config, {MakeQueue("q")});
  GangPtr a = Submit(Spec("q").Pods(1, 4));
  GangPtr b = Submit(Spec("q").Pods(1, 2));
  Cycle();
  EXPECT_EQ(scheduler_->FindGang(a->id)->placement[0].node,
            NodeId("H100-0000"));
  EXPECT_EQ(scheduler_->FindGang(b->id)->placement[0].node,
            NodeId("H100-0000"));
}

TEST_F(AdmissionTest, AFailedGangIsRetriedOnlyWhenCapacityMoves) {
  Init({}, {MakeQueue("q")});
  GangPtr filler = Submit(Spec("q").Pods(4, 8));
  GangPtr waiting = Submit(Spec("q").Pods(1, 8));
  Cycle();
  const int64_t epoch = scheduler_->capacity_epoch();
  Cycle();  // nothing changed: the epoch stands and the gang still waits
  EXPECT_EQ(scheduler_->capacity_epoch(), epoch);
  EXPECT_EQ(StateOf(waiting), GangState::kPending);
  ASSERT_TRUE(scheduler_->Cancel(filler->id, "", now_).ok());
  EXPECT_GT(scheduler_->capacity_epoch(), epoch);
  Cycle();
  EXPECT_EQ(StateOf(waiting), GangState::kAdmitted);
}

TEST_F(AdmissionTest, LedgerSurvivesARestart) {
  Init({}, {MakeQueue("q")});
  MemoryStore store;
  Submit(Spec("q").Pods(2, 8));
  Cycle();
  now_ += absl::Hours(10);
  Cycle();  // samples the ledger
  ASSERT_TRUE(store.Commit(scheduler_->TakeMutation()).ok());
  const double usage =
      scheduler_->quotas().ledger().DecayedUsage(QueueName("q"));
  EXPECT_GT(usage, 0.0);
  auto restored = Scheduler::Restore(*store.LoadAll(), now_);
  ASSERT_TRUE(restored.ok());
  EXPECT_DOUBLE_EQ((*restored)->quotas().ledger().DecayedUsage(QueueName("q")),
                   usage);
  EXPECT_EQ((*restored)->quotas().Score(QueueName("q")),
            scheduler_->quotas().Score(QueueName("q")));
}

}  // namespace
}  // namespace phalanx::core

namespace phalanx::core {
namespace {

// One block of 2 racks x 2 nodes. A 1-node gang (1 h) runs in one rack and a
// 2-node gang (9 h) fills the other, so a 2-node rack gang reserves the rack
// that frees first; others may use its free node only if they end before.
class ReservationTest : public AdmissionTest {
 protected:
  void SetUp() override {
    Init({}, {MakeQueue("q")});
    short_ = Submit(
        Estimated(Spec("q").Pods(1, 8).Required("rack"), absl::Hours(1)));
    long_ = Submit(
        Estimated(Spec("q").Pods(2, 8).Required("rack"), absl::Hours(9)));
    Cycle();
  }
  static GangSpec Estimated(GangSpec spec, absl::Duration estimate) {
    spec.estimated_runtime = estimate;
    return spec;
  }
  std::string RackOf(const GangPtr& gang) {
    return scheduler_->FindGang(gang->id)->placement[0].node.value().substr(0,
                                                                            7);
  }
  GangPtr short_, long_;
};

TEST_F(ReservationTest, HeadGangReservesTheDomainThatFreesFirst) {
  ASSERT_EQ(StateOf(long_), GangState::kAdmitted);
  ASSERT_NE(RackOf(short_), RackOf(long_));
  GangPtr big = Submit(Spec("q").Pods(2, 8).Required("rack"));
  Cycle();
  EXPECT_EQ(StateOf(big), GangState::kPending);
  ASSERT_EQ(scheduler_->reservations().size(), 1u);
  const Reservation& r = scheduler_->reservations()[0];
  EXPECT_EQ(r.gang, big->id);
  EXPECT_EQ(r.path, "b0/r0-" + RackOf(short_).substr(6, 1));
  EXPECT_EQ(r.start,
            *scheduler_->FindGang(short_->id)->admit_time + absl::Hours(1));
  auto explanation = scheduler_->Explain(big->id);
  ASSERT_TRUE(explanation.ok());
  ASSERT_TRUE(explanation->reservation.has_value());
  EXPECT_EQ(explanation->reservation->path, r.path);
  // Once the short gang ends, the big one starts in its reserved rack.
  ASSERT_TRUE(
      scheduler_
          ->Report({short_->id, GangState::kSucceeded, {}, false, ""}, now_)
          .ok());
  Cycle();
  EXPECT_EQ(StateOf(big), GangState::kAdmitted);
}

TEST_F(ReservationTest, OnlyGangsThatEndBeforeTheStartMayBackfill) {
  GangPtr big = Submit(Spec("q").Pods(2, 8).Required("rack"));
  GangPtr unknown = Submit(Spec("q").Pods(1, 8));
  GangPtr too_long = Submit(Estimated(Spec("q").Pods(1, 8), absl::Hours(5)));
  GangPtr quick = Submit(Estimated(Spec("q").Pods(1, 8), absl::Minutes(30)));
  Cycle();
  EXPECT_EQ(StateOf(big), GangState::kPending);
  EXPECT_EQ(StateOf(unknown), GangState::kPending);
  // Kept out of big's nodes (with the default depth of 3 it reserves
  // nodes of its own too, so the cause comes in brackets).
  EXPECT_THAT(ReasonOf(unknown), HasSubstr("RESERVED_FOR: it would fit in"));
  // Another queue's gang may hold the nodes: the reason names no gang.
  EXPECT_THAT(ReasonOf(unknown), Not(HasSubstr(big->id.value())));
  EXPECT_THAT(ReasonOf(unknown), HasSubstr("without estimated_runtime"));
  EXPECT_EQ(StateOf(too_long), GangState::kPending);
  EXPECT_EQ(StateOf(quick), GangState::kAdmitted);
}

// Between full plans (every 10 s while capacity changes) a kept
// reservation goes when its gang leaves the line, and the next gang in line
// may reserve at once.
TEST_F(ReservationTest, AReservationEndsWithItsGangBetweenFullPlans) {
  GangPtr big = Submit(Spec("q").Pods(2, 8).Required("rack"));
  Cycle();
  ASSERT_EQ(scheduler_->reservations().size(), 1u);
  ASSERT_TRUE(scheduler_->Cancel(big->id, "test", now_).ok());
  Cycle();
  EXPECT_TRUE(scheduler_->reservations().empty());
  GangPtr next = Submit(Spec("q").Pods(2, 8).Required("rack"));
  Cycle();
  ASSERT_EQ(scheduler_->reservations().size(), 1u);
  EXPECT_EQ(scheduler_->reservations()[0].gang, next->id);
  // A quiet cycle after the interval plans afresh and keeps the same rack.
  const std::string path = scheduler_->reservations()[0].path;
  scheduler_->RunCycle(now_ += absl::Seconds(30));
  ASSERT_EQ(scheduler_->reservations().size(), 1u);
  EXPECT_EQ(scheduler_->reservations()[0].path, path);
}

TEST_F(ReservationTest, LoweringTheDepthDropsKeptReservationsAtOnce) {
  GangPtr big = Submit(Spec("q").Pods(2, 8).Required("rack"));
  Cycle();
  ASSERT_EQ(scheduler_->reservations().size(), 1u);
  Config config = scheduler_->config();
  config.reservation.depth = 0;
  ASSERT_TRUE(scheduler_->UpdateConfig(config, std::nullopt).ok());
  Cycle();
  EXPECT_TRUE(scheduler_->reservations().empty());
  EXPECT_EQ(StateOf(big), GangState::kPending);
}

TEST_F(ReservationTest, DepthZeroTurnsReservationsOff) {
  Config config = scheduler_->config();
  config.reservation.depth = 0;
  ASSERT_TRUE(scheduler_->UpdateConfig(config, std::nullopt).ok());
  GangPtr big = Submit(Spec("q").Pods(2, 8).Required("rack"));
  GangPtr small = Submit(Spec("q").Pods(1, 8));
  Cycle();
  EXPECT_TRUE(scheduler_->reservations().empty());
  EXPECT_THAT(ReasonOf(big), StartsWith("NO_FIT"));
  EXPECT_EQ(StateOf(small), GangState::kAdmitted);
}

}  // namespace
}  // namespace phalanx::core

namespace phalanx::core {
namespace {

TEST_F(AdmissionTest, MaxRuntimeFailsTheGangAndReleasesItsGpus) {
  Init({}, {MakeQueue("q")});
  GangSpec spec = Spec("q").Pods(4, 8);
  spec.max_runtime = absl::Hours(2);
  GangPtr gang = Submit(spec);
  GangPtr next = Submit(Spec("q").Pods(1, 8));
  Cycle();
  ASSERT_EQ(StateOf(gang), GangState::kAdmitted);
  now_ += absl::Hours(2);
  Cycle();
  EXPECT_EQ(StateOf(gang), GangState::kFailed);
  EXPECT_EQ(ReasonOf(gang), "MAX_RUNTIME");
  EXPECT_EQ(StateOf(next), GangState::kAdmitted);
}

TEST_F(AdmissionTest, StartTimeoutRequeuesAGangNeverReportedRunning) {
  Config config;
  config.start_timeout = absl::Minutes(10);
  Init(config, {MakeQueue("q")});
  GangPtr silent = Submit(Spec("q").Pods(1, 8));
  GangPtr running = Submit(Spec("q").Pods(1, 8));
  Cycle();
  ASSERT_TRUE(
      scheduler_
          ->Report({running->id, GangState::kRunning, {}, false, ""}, now_)
          .ok());
  now_ += absl::Minutes(10);
  scheduler_->RunCycle(now_);
  EXPECT_EQ(StateOf(running), GangState::kRunning);
  // Requeued in its old place, then admitted again in the same cycle.
  const Gang& again = *scheduler_->FindGang(silent->id);
  EXPECT_EQ(again.state, GangState::kAdmitted);
  EXPECT_EQ(again.attempts, 2);
  EXPECT_EQ(again.submit_time, silent->submit_time);
}

TEST_F(AdmissionTest, SilentNodeBecomesUnhealthyAfterTheGracePeriod) {
  Config config;
  config.heartbeat_timeout = absl::Minutes(1);
  config.startup_grace = absl::Minutes(5);
  Init(config, {MakeQueue("q")});
  GangPtr gang = Submit(Spec("q").Pods(1, 8));
  Cycle();
  const NodeId node = scheduler_->FindGang(gang->id)->placement[0].node;
  std::vector<NodeId> others;
  for (const Fleet::Slot& slot : scheduler_->fleet().slots()) {
    if (slot.node.spec.id != node) others.push_back(slot.node.spec.id);
  }
  for (int minute = 1; minute <= 4; ++minute) {  // inside the grace period
    now_ += absl::Minutes(1);
    ASSERT_TRUE(scheduler_->Heartbeat(others, now_).ok());
    scheduler_->RunCycle(now_);
  }
  EXPECT_EQ(StateOf(gang), GangState::kAdmitted);
  now_ += absl::Minutes(2);
  ASSERT_TRUE(scheduler_->Heartbeat(others, now_).ok());
  scheduler_->RunCycle(now_);
  const int slot = scheduler_->fleet().Find(node);
  EXPECT_EQ(scheduler_->fleet().slots()[slot].node.state,
            NodeState::kUnhealthy);
  EXPECT_NE(scheduler_->FindGang(gang->id)->placement[0].node, node);
}

}  // namespace
}  // namespace phalanx::core

namespace phalanx::core {
namespace {

class PreemptionTest : public AdmissionTest {
 protected:
  void SetUp() override { Init(testing::PreemptionConfig(), {MakeQueue("q")}); }
};

TEST_F(PreemptionTest, HigherPriorityPreemptsTheCheapestSufficientVictims) {
  // Two 2-node low-priority gangs fill the fleet; the newer one loses less.
  GangPtr old_low = Submit(Spec("q").Pods(2, 8));
  Cycle();
  now_ += absl::Hours(2);
  GangPtr new_low = Submit(Spec("q").Pods(2, 8));
  Cycle();
  now_ += absl::Minutes(30);
  GangPtr high = Submit(Spec("q").Pods(2, 8).Priority(10));
  GangPtr other_low = Submit(Spec("q").Pods(1, 8));  // must not take the hold
  Cycle();
  EXPECT_EQ(StateOf(new_low), GangState::kPreempting);
  EXPECT_EQ(StateOf(old_low), GangState::kAdmitted);
  EXPECT_EQ(ReasonOf(high),
            "PREEMPTING: waiting for " + new_low->id.value() + " to stop");
  // The victim acknowledges: its GPUs go to the preemptor, not other_low.
  ASSERT_TRUE(
      scheduler_->Report({new_low->id, std::nullopt, {}, true, ""}, now_).ok());
  EXPECT_THAT(ReasonOf(new_low), HasSubstr("preempted by " + high->id.value()));
  Cycle();
  EXPECT_EQ(StateOf(high), GangState::kAdmitted);
  EXPECT_EQ(StateOf(new_low), GangState::kPending);
  EXPECT_EQ(StateOf(other_low), GangState::kPending);
}

TEST_F(PreemptionTest, GracePeriodEndsThePreemptionWithoutAnAck) {
  GangPtr low = Submit(Spec("q").Pods(4, 8));
  Cycle();
  now_ += absl::Minutes(12);
  GangPtr high = Submit(Spec("q").Pods(1, 8).Priority(1));
  Cycle();
  ASSERT_EQ(StateOf(low), GangState::kPreempting);
  now_ += absl::Minutes(5);
  Cycle();
  EXPECT_EQ(StateOf(low), GangState::kPending);
  EXPECT_EQ(StateOf(high), GangState::kAdmitted);
}

TEST_F(PreemptionTest, NeverThrowsAwayMoreWorkThanAnHourOfThePreemptorsWait) {
  GangPtr low = Submit(Spec("q").Pods(4, 8));
  Cycle();
  now_ += absl::Hours(2);  // 64 GPU-hours would be lost
  GangPtr small = Submit(Spec("q").Pods(1, 8).Priority(5));  // budget 8
  Cycle();
  EXPECT_EQ(StateOf(low), GangState::kAdmitted);
  EXPECT_THAT(ReasonOf(small), StartsWith("NO_FIT"));
  GangPtr whole = Submit(Spec("q").Pods(4, 8).Priority(9));  // budget 32
  Cycle();
  EXPECT_EQ(StateOf(low), GangState::kAdmitted);
  EXPECT_THAT(ReasonOf(whole), StartsWith("NO_FIT"));
}

TEST_F(PreemptionTest, HorizonConfigSetsTheBudget) {
  GangPtr low = Submit(Spec("q").Pods(4, 8));
  Cycle();
  now_ += absl::Hours(2);  // 64 GPU-hours would be lost
  Config config = scheduler_->config();
  config.preemption.horizon = absl::Hours(3);  // budget 32 x 3h = 96
  ASSERT_TRUE(scheduler_->UpdateConfig(config, std::nullopt).ok());
  GangPtr whole = Submit(Spec("q").Pods(4, 8).Priority(9));
  Cycle();
  EXPECT_EQ(StateOf(low), GangState::kPreempting);
  EXPECT_EQ(ReasonOf(whole),
            "PREEMPTING: waiting for " + low->id.value() + " to stop");
}

TEST_F(PreemptionTest, ZeroHorizonThrowsNoWorkAway) {
  Config config = scheduler_->config();
  config.preemption.horizon = absl::ZeroDuration();
  ASSERT_TRUE(scheduler_->UpdateConfig(config, std::nullopt).ok());
  GangPtr low = Submit(Spec("q").Pods(4, 8));
  Cycle();
  now_ += absl::Hours(1);
  GangPtr high = Submit(Spec("q").Pods(1, 8).Priority(9));
  Cycle();
  EXPECT_EQ(StateOf(low), GangState::kAdmitted);
  EXPECT_THAT(ReasonOf(high), StartsWith("NO_FIT"));
  config.preemption.horizon = -absl::Seconds(1);
  auto bad = scheduler_->UpdateConfig(config, std::nullopt);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "config.preemption.horizon: must be >= 0");
}

TEST_F(PreemptionTest, EqualPriorityAndYoungGangsAreNeverVictims) {
  GangPtr low = Submit(Spec("q").Pods(4, 8));
  Cycle();
  GangPtr same = Submit(Spec("q").Pods(1, 8));
  GangPtr high = Submit(Spec("q").Pods(1, 8).Priority(5));
  Cycle();  // low ran 1 s: under min_runtime
  EXPECT_EQ(StateOf(low), GangState::kAdmitted);
  now_ += absl::Minutes(9);
  Cycle();  // nothing changed, still under min_runtime
  EXPECT_EQ(StateOf(low), GangState::kAdmitted);
  now_ += absl::Minutes(1);
  Cycle();  // the guard passed: time alone wakes the cycle up
  EXPECT_EQ(StateOf(low), GangState::kPreempting);
  EXPECT_EQ(StateOf(same), GangState::kPending);
  EXPECT_THAT(ReasonOf(high), StartsWith("PREEMPTING"));
}

}  // namespace
}  // namespace phalanx::core

namespace phalanx::core {
namespace {

TEST(PendingGroupTest, PassesOverMembersWithEstimatesNoShorterThanAFailure) {
  PendingIndex index;
  std::vector<Gang> gangs;
  const int hours[] = {5, 9, 2, 7, 1};
  for (int i = 0; i < 5; ++i) {
    Gang gang;
    gang.id = GangId(absl::StrCat("g-00000", i + 1));
    gang.spec.queue = QueueName("q");
    gang.spec.pod_sets.push_back(PodSetSpec{});
    gang.spec.estimated_runtime = absl::Hours(hours[i]);
    gang.submit_time = absl::FromUnixSeconds(i);
    index.Insert(gang, static_cast<GangHandle>(i));
    gangs.push_back(gang);
  }
  PendingGroup& group = *index.GroupOf(static_cast<GangHandle>(0));
  ASSERT_EQ(group.members.size(), 5u);
  EXPECT_EQ(group.FirstNotKnownToFail(1, group.members.begin())->id,
            gangs[0].id);  // nothing known at epoch 1 yet
  group.RecordFailure(1, absl::Hours(5), ReasonCode::kNoFit, "NO_FIT");
  EXPECT_EQ(group.FirstNotKnownToFail(1, group.members.begin())->id,
            gangs[2].id);  // 2 h is the first shorter than 5 h
  group.RecordFailure(1, absl::Hours(2), ReasonCode::kNoFit, "NO_FIT");
  EXPECT_EQ(group.FirstNotKnownToFail(1, group.members.begin())->id,
            gangs[4].id);
  EXPECT_FALSE(group.AllKnownToFail(1));
  group.RecordFailure(1, absl::Hours(1), ReasonCode::kNoFit, "NO_FIT");
  EXPECT_TRUE(group.AllKnownToFail(1));
  EXPECT_EQ(group.FirstNotKnownToFail(1, group.members.begin()),
            group.members.end());
  EXPECT_FALSE(group.AllKnownToFail(2));  // the epoch moved
  index.Erase(gangs[4], static_cast<GangHandle>(4));
  EXPECT_TRUE(group.AllKnownToFail(1));  // the shortest left is 2 h
  EXPECT_EQ(group.by_estimate.size(), 4u);
}

}  // namespace
}  // namespace phalanx::core
