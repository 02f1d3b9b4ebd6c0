// What a gang remembers of its runs, for a replay of the fleet's history:
// its first admission, the time it held GPUs over attempts that ended
// (preemption, eviction, lease lapse, finish) and how often it was
// preempted, on the fixture's virtual clock.
#include "core/scheduler.h"
#include "core/testing.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using testing::kT0;
using testing::MakeNodes;
using testing::Spec;

// One rack of 2 nodes (16 GPUs): a 2-pod gang fills it.
class RunHistoryTest : public testing::SchedulerFixture {
 protected:
  void SetUp() override {
    Init(testing::PreemptionConfig(), MakeNodes(1, 1, 2),
         {testing::MakeQueue("q")});
  }
  void ReportState(const GangPtr& gang, GangState state) {
    GangReport report;
    report.gang_id = gang->id;
    report.state = state;
    ASSERT_TRUE(scheduler_->Report(report, now_).ok());
  }
};

TEST_F(RunHistoryTest, ANewGangHasNoRunYet) {
  Submit(Spec("q").Pods(2, 8));  // fills the fleet
  GangPtr gang = Submit(Spec("q").Pods(1, 8));
  Cycle();
  EXPECT_EQ(StateOf(gang), GangState::kPending);
  EXPECT_FALSE(Get(gang)->first_admit_time.has_value());
  EXPECT_EQ(Get(gang)->previous_run_time, absl::ZeroDuration());
  EXPECT_EQ(Get(gang)->preemptions, 0);
}

TEST_F(RunHistoryTest, AFinishedGangHasItsWholeRunTime) {
  GangPtr gang = Submit(Spec("q").Pods(2, 8));
  CycleAt(kT0 + absl::Seconds(10));
  ASSERT_EQ(StateOf(gang), GangState::kAdmitted);
  EXPECT_EQ(Get(gang)->first_admit_time, kT0 + absl::Seconds(10));
  // While it holds GPUs, the current attempt is not in previous_run_time.
  CycleAt(kT0 + absl::Minutes(30));
  EXPECT_EQ(Get(gang)->previous_run_time, absl::ZeroDuration());
  ReportState(gang, GangState::kSucceeded);
  EXPECT_EQ(Get(gang)->previous_run_time,
            absl::Minutes(30) - absl::Seconds(10));
  EXPECT_EQ(Get(gang)->attempts, 1);
  EXPECT_EQ(Get(gang)->preemptions, 0);
}

TEST_F(RunHistoryTest, APreemptedGangKeepsItsFirstAdmitAndAddsEachAttempt) {
  GangPtr low = Submit(Spec("q").Pods(2, 8));
  CycleAt(kT0 + absl::Seconds(1));
  ASSERT_EQ(StateOf(low), GangState::kAdmitted);
  GangPtr high = Submit(Spec("q").Pods(2, 8).Priority(1));
  const absl::Time preempted_at = kT0 + absl::Minutes(12);
  CycleAt(preempted_at);
  ASSERT_EQ(StateOf(low), GangState::kPreempting);
  // The grace period runs out: requeued, its GPUs taken. The preempting
  // time counts: it held the GPUs until then.
  CycleAt(preempted_at + absl::Minutes(5));
  ASSERT_EQ(StateOf(low), GangState::kPending);
  const absl::Duration first_run =
      preempted_at + absl::Minutes(5) - (kT0 + absl::Seconds(1));
  EXPECT_EQ(Get(low)->previous_run_time, first_run);
  EXPECT_EQ(Get(low)->preemptions, 1);
  EXPECT_EQ(Get(low)->attempts, 1);
  Cycle();
  ASSERT_EQ(StateOf(high), GangState::kAdmitted);
  ReportState(high, GangState::kSucceeded);
  const absl::Time readmitted_at = now_ + absl::Seconds(1);
  CycleAt(readmitted_at);
  ASSERT_EQ(StateOf(low), GangState::kAdmitted);
  EXPECT_EQ(Get(low)->first_admit_time, kT0 + absl::Seconds(1));
  EXPECT_EQ(Get(low)->admit_time, readmitted_at);
  EXPECT_EQ(Get(low)->attempts, 2);
  now_ = readmitted_at + absl::Minutes(7);
  ReportState(low, GangState::kFailed);
  EXPECT_EQ(Get(low)->previous_run_time, first_run + absl::Minutes(7));
  EXPECT_EQ(Get(low)->preemptions, 1);
}

TEST_F(RunHistoryTest, AnAcknowledgedPreemptionCountsToo) {
  GangPtr low = Submit(Spec("q").Pods(2, 8));
  CycleAt(kT0 + absl::Seconds(1));
  Submit(Spec("q").Pods(2, 8).Priority(1));
  CycleAt(kT0 + absl::Minutes(12));
  ASSERT_EQ(StateOf(low), GangState::kPreempting);
  now_ = kT0 + absl::Minutes(13);
  GangReport ack;
  ack.gang_id = low->id;
  ack.preemption_acknowledged = true;
  ASSERT_TRUE(scheduler_->Report(ack, now_).ok());
  ASSERT_EQ(StateOf(low), GangState::kPending);
  EXPECT_EQ(Get(low)->preemptions, 1);
  EXPECT_EQ(Get(low)->previous_run_time, absl::Minutes(13) - absl::Seconds(1));
}

TEST_F(RunHistoryTest, AnEvictionAddsItsRunButIsNoPreemption) {
  GangPtr gang = Submit(Spec("q").Pods(2, 8));  // both nodes: no repair
  CycleAt(kT0 + absl::Seconds(1));
  ASSERT_EQ(StateOf(gang), GangState::kAdmitted);
  now_ = kT0 + absl::Minutes(3);
  ASSERT_TRUE(scheduler_
                  ->SetNodeState(Get(gang)->placement[0].node,
                                 NodeState::kUnhealthy, "xid 79", now_)
                  .ok());
  ASSERT_EQ(StateOf(gang), GangState::kPending);
  EXPECT_EQ(Get(gang)->previous_run_time, absl::Minutes(3) - absl::Seconds(1));
  EXPECT_EQ(Get(gang)->preemptions, 0);
  EXPECT_EQ(Get(gang)->first_admit_time, kT0 + absl::Seconds(1));
}

TEST_F(RunHistoryTest, ACancelledRunningGangHasItsRunTime) {
  GangPtr gang = Submit(Spec("q").Pods(1, 8));
  CycleAt(kT0 + absl::Seconds(2));
  ReportState(gang, GangState::kRunning);
  now_ = kT0 + absl::Seconds(62);
  ASSERT_TRUE(scheduler_->Cancel(gang->id, "done early", now_).ok());
  EXPECT_EQ(StateOf(gang), GangState::kCancelled);
  EXPECT_EQ(Get(gang)->previous_run_time, absl::Minutes(1));
}

}  // namespace
}  // namespace phalanx::core
