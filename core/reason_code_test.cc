// Every reason a gang carries comes with its code: pending reasons from each
// stage of the cycle, the reasons of preemption and of final states, and
// codes derived for stored records that carry none.
#include <memory>

#include "core/memory_store.h"
#include "core/scheduler.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using testing::MakeNodes;
using testing::MakeQueue;
using testing::Spec;
using ::testing::StartsWith;

class ReasonCodeTest : public testing::SchedulerFixture {
 protected:
  // Two nodes of 8 GPUs in one rack, queue "q" (with a nominal quota of
  // `nominal` GPUs when not negative).
  void Init(Config config, int64_t nominal = -1) {
    config.topology_levels = {"block", "rack"};
    SchedulerFixture::Init(config, MakeNodes(1, 1, 2),
                           {MakeQueue("q", nominal)});
  }
  ReasonCode CodeOf(const GangPtr& gang) { return Get(gang)->reason_code; }
};

TEST_F(ReasonCodeTest, NamesAreStable) {
  EXPECT_STREQ(ReasonCodeName(ReasonCode::kNone), "NONE");
  EXPECT_STREQ(ReasonCodeName(ReasonCode::kNoFit), "NO_FIT");
  EXPECT_STREQ(ReasonCodeName(ReasonCode::kBlockedByReservation),
               "RESERVED_FOR");
  EXPECT_STREQ(ReasonCodeName(ReasonCode::kLeaseExpired), "LEASE_EXPIRED");
  EXPECT_STREQ(ReasonCodeName(static_cast<ReasonCode>(kReasonCodeCount)),
               "NONE");
}

TEST_F(ReasonCodeTest, PendingGangsCarryTheCodeOfTheirStage) {
  Config config;
  config.preemption.enabled = false;
  config.reservation.depth = 0;
  Init(config);
  GangPtr first = Submit(Spec("q").Pods(2, 8));
  GangPtr second = Submit(Spec("q").Pods(2, 8).Preferred("rack"));
  EXPECT_EQ(CodeOf(second), ReasonCode::kWaiting);
  Cycle();
  EXPECT_EQ(CodeOf(first), ReasonCode::kNone);  // admitted
  EXPECT_EQ(CodeOf(second), ReasonCode::kNoFit);
}

TEST_F(ReasonCodeTest, APodSetNamedReasonStillCountsAsNoFit) {
  Config config;
  config.preemption.enabled = false;
  config.reservation.depth = 0;
  Init(config);
  Submit(Spec("q").Pods(1, 8));
  Cycle();
  GangPtr two_sets = Submit(Spec("q").Pods(1, 8, "a").Pods(1, 8, "b"));
  Cycle();
  const GangPtr now = Get(two_sets);
  EXPECT_THAT(now->reason, StartsWith("pod set "));
  EXPECT_EQ(now->reason_code, ReasonCode::kNoFit);
}

TEST_F(ReasonCodeTest, QuotaAndHeldQueues) {
  Init(Config{}, /*nominal=*/8);
  GangPtr over = Submit(Spec("q").Pods(2, 8));
  Cycle();
  EXPECT_EQ(CodeOf(over), ReasonCode::kQuota);
  Queue held = scheduler_->queues().at(QueueName("q"));
  held.held = true;
  ASSERT_TRUE(scheduler_->PutQueue(held).ok());
  GangPtr small = Submit(Spec("q").Pods(1, 8));
  Cycle();
  EXPECT_EQ(CodeOf(small), ReasonCode::kQueueHeld);
}

TEST_F(ReasonCodeTest, AReservationAndTheCauseItLeavesWhenItGoes) {
  Config config;
  config.reservation.depth = 1;
  config.preemption.enabled = false;
  Init(config);
  Submit(Spec("q").Pods(1, 8));
  Cycle();
  GangPtr head = Submit(Spec("q").Pods(2, 8).Priority(5));
  Cycle();
  ASSERT_EQ(scheduler_->reservations().size(), 1u);
  EXPECT_EQ(CodeOf(head), ReasonCode::kReserved);
  EXPECT_EQ(ReasonCodeOfStoredText(Get(head)->reason), ReasonCode::kReserved);
  Config off = scheduler_->config();
  off.reservation.depth = 0;
  ASSERT_TRUE(scheduler_->UpdateConfig(off, std::nullopt).ok());
  Cycle();
  EXPECT_TRUE(scheduler_->reservations().empty());
  // The code and the text agree again: the cause it reserved for.
  EXPECT_EQ(CodeOf(head), ReasonCode::kNoFit);
  EXPECT_EQ(ReasonCodeOfStoredText(Get(head)->reason), ReasonCode::kNoFit);
}

TEST_F(ReasonCodeTest, StrictFifoNamesTheBlockedGangs) {
  Config config;
  config.admission.ordering = Ordering::kSubmitOrder;
  config.admission.strict_fifo = true;
  config.reservation.depth = 0;
  config.preemption.enabled = false;
  Init(config);
  Submit(Spec("q").Pods(1, 8));
  Cycle();
  GangPtr big = Submit(Spec("q").Pods(2, 8));
  GangPtr behind = Submit(Spec("q").Pods(1, 8));
  Cycle();
  EXPECT_EQ(CodeOf(big), ReasonCode::kNoFit);
  EXPECT_EQ(CodeOf(behind), ReasonCode::kStrictFifo);
}

TEST_F(ReasonCodeTest, NeverFitsWhenAcceptedAnyway) {
  Config config;
  config.admission.accept_unfit_gangs = true;
  Init(config);
  GangPtr huge = Submit(Spec("q").Pods(3, 8).Required("rack"));
  EXPECT_EQ(CodeOf(huge), ReasonCode::kNeverFits);
  Cycle();
  EXPECT_EQ(CodeOf(huge), ReasonCode::kNeverFits);
}

TEST_F(ReasonCodeTest, PreemptionVictimAndPreemptor) {
  Config config;
  config.preemption.min_runtime = absl::ZeroDuration();
  config.reservation.depth = 0;
  Init(config);
  GangPtr victim = Submit(Spec("q").Pods(2, 8));
  Cycle();
  GangPtr urgent = Submit(Spec("q").Pods(2, 8).Priority(10));
  now_ += absl::Minutes(10);  // within preemption.horizon of lost work
  Cycle();
  ASSERT_EQ(StateOf(victim), GangState::kPreempting);
  EXPECT_EQ(CodeOf(victim), ReasonCode::kPreempted);
  EXPECT_EQ(CodeOf(urgent), ReasonCode::kPreempting);
  GangReport ack;
  ack.gang_id = victim->id;
  ack.preemption_acknowledged = true;
  ASSERT_TRUE(scheduler_->Report(ack, now_).ok());
  EXPECT_EQ(CodeOf(victim), ReasonCode::kRequeued);
}

TEST_F(ReasonCodeTest, FinalStates) {
  Init(Config{});
  GangPtr cancelled = Submit(Spec("q").Pods(1, 8));
  ASSERT_TRUE(scheduler_->Cancel(cancelled->id, "", now_).ok());
  EXPECT_EQ(CodeOf(cancelled), ReasonCode::kCancelled);
  GangPtr done = Submit(Spec("q").Pods(1, 8));
  Cycle();
  GangReport report;
  report.gang_id = done->id;
  report.state = GangState::kSucceeded;
  ASSERT_TRUE(scheduler_->Report(report, now_).ok());
  EXPECT_EQ(CodeOf(done), ReasonCode::kSucceeded);
}

TEST_F(ReasonCodeTest, RestoreDerivesCodesOfRecordsStoredWithout) {
  Init(Config{});
  GangPtr pending = Submit(Spec("q").Pods(1, 8));
  MemoryStore store;
  ASSERT_TRUE(store.Commit(scheduler_->TakeMutation()).ok());
  absl::StatusOr<LoadedState> loaded = store.LoadAll();
  ASSERT_TRUE(loaded.ok());
  for (Gang& gang : loaded->gangs) {
    gang.reason_code = ReasonCode::kNone;
    gang.reason = "NO_FIT: stored before codes";
  }
  auto restored = Scheduler::Restore(*std::move(loaded), now_);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ((*restored)->FindGang(pending->id)->reason_code,
            ReasonCode::kNoFit);
  EXPECT_EQ(ReasonCodeOfStoredText("WAITING: strict FIFO: behind gang g-1"),
            ReasonCode::kStrictFifo);
  EXPECT_EQ(ReasonCodeOfStoredText("REQUEUED: not reported RUNNING within 5m"),
            ReasonCode::kStartTimeout);
  EXPECT_EQ(ReasonCodeOfStoredText("something else"), ReasonCode::kNone);
}

}  // namespace
}  // namespace phalanx::core
