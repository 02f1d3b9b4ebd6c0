// Gang leases (GangSpec::lease_duration) in the scheduler: they start at
// admission, lapse into FAILED/LEASE_EXPIRED freeing the GPUs, are renewed
// without an event, and survive a restart without lapsing during the
// start-up grace. Also the PREEMPTING grace deadline and CHECKPOINTED
// events, which launchers watch beside their lease.
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
using testing::Spec;

GangSpec Leased(absl::Duration lease, int pods = 2) {
  GangSpec spec = Spec("q").Pods(pods, 8);
  spec.lease_duration = lease;
  return spec;
}

int FreeGpus(const Scheduler& s) {
  int free = 0;
  for (const Fleet::Slot& slot : s.fleet().slots()) free += slot.FreeGpus();
  return free;
}

class LeaseTest : public testing::SchedulerFixture {
 protected:
  LeaseTest() { Init(Config{}); }
  void Init(Config config) {
    config.reservation.depth = 0;
    SchedulerFixture::Init(config, MakeNodes(1, 2, 2),
                           {testing::MakeQueue("q")});
  }
  // Commits everything so far to `store` and restarts from it at `now_`.
  void Restart(MemoryStore& store) {
    ASSERT_TRUE(store.Commit(scheduler_->TakeMutation()).ok());
    auto restored = Scheduler::Restore(*store.LoadAll(), now_);
    ASSERT_TRUE(restored.ok()) << restored.status();
    scheduler_ = *std::move(restored);
  }
};

TEST_F(LeaseTest, APendingGangHasNoLeaseAndCannotRenew) {
  Submit(Spec("q").Pods(4, 8));  // holds every GPU, without a lease
  GangPtr waiting = Submit(Leased(absl::Seconds(30), 4));
  CycleAt(kT0 + absl::Seconds(1));
  ASSERT_EQ(Get(waiting)->state, GangState::kPending);
  EXPECT_FALSE(Get(waiting)->lease_expire_time.has_value());
  auto renewed = scheduler_->RenewLease(waiting->id, now_);
  EXPECT_EQ(renewed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(renewed.status().message(),
              HasSubstr("starts when it is admitted"));
  // A pending gang never lapses, however long it waits.
  CycleAt(kT0 + absl::Hours(2));
  EXPECT_EQ(Get(waiting)->state, GangState::kPending);
}

TEST_F(LeaseTest, ALapsedLeaseFailsTheGangAndFreesItsGpus) {
  GangPtr gang = Submit(Leased(absl::Seconds(30)));
  CycleAt(kT0 + absl::Seconds(1));
  ASSERT_EQ(Get(gang)->state, GangState::kAdmitted);
  EXPECT_EQ(Get(gang)->lease_expire_time, kT0 + absl::Seconds(31));
  EXPECT_EQ(FreeGpus(*scheduler_), 16);
  (void)scheduler_->TakeMutation();
  CycleAt(kT0 + absl::Seconds(30));
  EXPECT_EQ(Get(gang)->state, GangState::kAdmitted);
  CycleAt(kT0 + absl::Seconds(31));
  GangPtr failed = Get(gang);
  EXPECT_EQ(failed->state, GangState::kFailed);
  EXPECT_EQ(failed->reason, "LEASE_EXPIRED");
  EXPECT_THAT(failed->message, HasSubstr("lease_duration 30s"));
  // The last placement is kept, released (it holds no GPU).
  EXPECT_TRUE(failed->placement_released);
  EXPECT_FALSE(failed->placement.empty());
  EXPECT_FALSE(failed->lease_expire_time.has_value());
  EXPECT_EQ(FreeGpus(*scheduler_), 32);
  Mutation m = scheduler_->TakeMutation();
  ASSERT_EQ(m.events.size(), 1u);
  EXPECT_EQ(m.events[0].type, EventType::kFailed);
  // A final gang's lease cannot be renewed.
  EXPECT_EQ(scheduler_->RenewLease(gang->id, now_).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(LeaseTest, RenewalMovesTheExpiryWithoutAnEventOrRevision) {
  GangPtr gang = Submit(Leased(absl::Seconds(30)));
  CycleAt(kT0 + absl::Seconds(1));
  (void)scheduler_->TakeMutation();
  const int64_t revision = scheduler_->revision();
  auto renewed = scheduler_->RenewLease(gang->id, kT0 + absl::Seconds(25));
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ((*renewed)->lease_expire_time, kT0 + absl::Seconds(55));
  EXPECT_EQ(scheduler_->revision(), revision);
  Mutation m = scheduler_->TakeMutation();
  EXPECT_TRUE(m.events.empty());
  ASSERT_EQ(m.gangs_put.size(), 1u);  // durable all the same
  EXPECT_EQ(m.gangs_put[0]->lease_expire_time, kT0 + absl::Seconds(55));
  CycleAt(kT0 + absl::Seconds(54));
  EXPECT_EQ(Get(gang)->state, GangState::kAdmitted);
  CycleAt(kT0 + absl::Seconds(55));
  EXPECT_EQ(Get(gang)->reason, "LEASE_EXPIRED");
}

TEST_F(LeaseTest, NoLeaseNoRenewalAndNoExpiry) {
  GangPtr gang = Submit(Spec("q").Pods(1, 8));
  CycleAt(kT0 + absl::Seconds(1));
  EXPECT_FALSE(Get(gang)->lease_expire_time.has_value());
  auto renewed = scheduler_->RenewLease(gang->id, now_);
  EXPECT_EQ(renewed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(renewed.status().message(), HasSubstr("has no lease"));
  EXPECT_EQ(scheduler_->RenewLease(GangId("g-999"), now_).status().code(),
            absl::StatusCode::kNotFound);
  CycleAt(kT0 + absl::Hours(48));
  EXPECT_EQ(Get(gang)->state, GangState::kAdmitted);
}

TEST_F(LeaseTest, ARequeuedGangGetsAFreshLeaseAtItsNextAdmission) {
  Config config;
  config.start_timeout = absl::Seconds(10);
  Init(config);
  GangPtr gang = Submit(Leased(absl::Minutes(1)));
  CycleAt(kT0 + absl::Seconds(1));
  CycleAt(kT0 + absl::Seconds(11));   // not RUNNING in time: requeued...
  EXPECT_EQ(Get(gang)->attempts, 2);  // ...and admitted again in the cycle
  EXPECT_EQ(Get(gang)->lease_expire_time,
            kT0 + absl::Seconds(11) + absl::Minutes(1));
}

TEST_F(LeaseTest, ALeaseDoesNotLapseDuringTheStartupGraceAfterARestart) {
  Config config;
  config.startup_grace = absl::Minutes(5);
  Init(config);
  MemoryStore store;
  GangPtr gang = Submit(Leased(absl::Seconds(30)));
  CycleAt(kT0 + absl::Seconds(1));
  // The daemon is down from t0+10s to t0+60s: the lease (to t0+31s) passes.
  now_ = kT0 + absl::Seconds(60);
  Restart(store);
  EXPECT_EQ(Get(gang)->lease_expire_time, kT0 + absl::Seconds(31));
  CycleAt(kT0 + absl::Seconds(61));
  CycleAt(kT0 + absl::Seconds(60) + absl::Minutes(5) - absl::Seconds(1));
  EXPECT_EQ(Get(gang)->state, GangState::kAdmitted);
  // Not renewed during the grace: it lapses when the grace ends.
  CycleAt(kT0 + absl::Seconds(60) + absl::Minutes(5));
  EXPECT_EQ(Get(gang)->reason, "LEASE_EXPIRED");
  EXPECT_EQ(FreeGpus(*scheduler_), 32);
}

TEST_F(LeaseTest, ARenewalAfterARestartKeepsTheGangAlive) {
  Config config;
  config.startup_grace = absl::Seconds(20);
  Init(config);
  MemoryStore store;
  GangPtr gang = Submit(Leased(absl::Seconds(30)));
  CycleAt(kT0 + absl::Seconds(1));
  now_ = kT0 + absl::Seconds(60);
  Restart(store);
  ASSERT_TRUE(scheduler_->RenewLease(gang->id, kT0 + absl::Seconds(70)).ok());
  CycleAt(kT0 + absl::Seconds(99));
  EXPECT_EQ(Get(gang)->state, GangState::kAdmitted);
  // The renewal was written: a second restart keeps the new expiry.
  Restart(store);
  EXPECT_EQ(Get(gang)->lease_expire_time, kT0 + absl::Seconds(100));
}

TEST_F(LeaseTest, ValidationNamesTheField) {
  for (absl::Duration bad :
       {absl::Milliseconds(500), absl::Hours(25), absl::Seconds(-1)}) {
    auto result = scheduler_->Submit(Leased(bad), now_);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(),
                HasSubstr("spec.lease_duration: must be 0 (no lease) or in "
                          "1s..24h"));
  }
  EXPECT_TRUE(scheduler_->Submit(Leased(absl::Hours(24)), now_).ok());
}

TEST_F(LeaseTest, TheLeaseIsPartOfTheIdempotencyFingerprint) {
  GangSpec spec = Leased(absl::Seconds(30));
  spec.request_id = "r";
  ASSERT_TRUE(scheduler_->Submit(spec, now_).ok());
  spec.lease_duration = absl::Seconds(40);
  EXPECT_EQ(scheduler_->Submit(spec, now_).status().code(),
            absl::StatusCode::kAlreadyExists);
}

class GraceDeadlineTest : public LeaseTest {
 protected:
  void SetUp() override {
    Config config;
    config.preemption.enabled = true;
    config.preemption.grace_period = absl::Minutes(5);
    config.preemption.min_runtime = absl::Minutes(10);
    Init(config);
  }
};

TEST_F(GraceDeadlineTest, APreemptingGangCarriesItsGraceDeadline) {
  GangPtr low = Submit(Spec("q").Pods(4, 8));
  CycleAt(kT0 + absl::Seconds(1));
  (void)scheduler_->TakeMutation();
  Submit(Spec("q").Pods(1, 8).Priority(1));
  const absl::Time preempted_at = kT0 + absl::Minutes(12);
  CycleAt(preempted_at);
  ASSERT_EQ(Get(low)->state, GangState::kPreempting);
  EXPECT_EQ(Get(low)->grace_deadline, preempted_at + absl::Minutes(5));
  Mutation m = scheduler_->TakeMutation();
  bool seen = false;
  for (const Event& event : m.events) {
    if (event.type != EventType::kPreempting) continue;
    seen = true;
    EXPECT_EQ(event.gang->grace_deadline, preempted_at + absl::Minutes(5));
  }
  EXPECT_TRUE(seen);
  // Requeued: no deadline any more.
  CycleAt(preempted_at + absl::Minutes(5));
  EXPECT_EQ(Get(low)->state, GangState::kPending);
  EXPECT_FALSE(Get(low)->grace_deadline.has_value());
}

TEST_F(GraceDeadlineTest, ARestartKeepsTheDeadlineTheLauncherWasTold) {
  MemoryStore store;
  GangPtr low = Submit(Spec("q").Pods(4, 8));
  CycleAt(kT0 + absl::Seconds(1));
  Submit(Spec("q").Pods(1, 8).Priority(1));
  const absl::Time preempted_at = kT0 + absl::Minutes(12);
  CycleAt(preempted_at);
  now_ = preempted_at + absl::Minutes(1);
  Restart(store);
  EXPECT_EQ(Get(low)->grace_deadline, preempted_at + absl::Minutes(5));
  CycleAt(preempted_at + absl::Minutes(5) - absl::Seconds(1));
  EXPECT_EQ(Get(low)->state, GangState::kPreempting);
  CycleAt(preempted_at + absl::Minutes(5));
  EXPECT_EQ(Get(low)->state, GangState::kPending);
}

TEST_F(LeaseTest, ACheckpointIsAnEventWithARevision) {
  GangPtr gang = Submit(Spec("q").Pods(1, 8));
  CycleAt(kT0 + absl::Seconds(1));
  (void)scheduler_->TakeMutation();
  const int64_t revision = scheduler_->revision();
  GangReport report{gang->id, std::nullopt, kT0 + absl::Seconds(5), false, ""};
  auto checkpointed = scheduler_->Report(report, kT0 + absl::Seconds(6));
  ASSERT_TRUE(checkpointed.ok()) << checkpointed.status();
  EXPECT_EQ((*checkpointed)->revision, revision + 1);
  Mutation m = scheduler_->TakeMutation();
  ASSERT_EQ(m.events.size(), 1u);
  EXPECT_EQ(m.events[0].type, EventType::kCheckpointed);
  EXPECT_EQ(m.events[0].gang->last_checkpoint_time, kT0 + absl::Seconds(5));
  // The same report again changes nothing: no event.
  ASSERT_TRUE(scheduler_->Report(report, kT0 + absl::Seconds(7)).ok());
  EXPECT_TRUE(scheduler_->TakeMutation().events.empty());
  // A checkpoint riding on RUNNING is one RUNNING event.
  report.state = GangState::kRunning;
  report.last_checkpoint_time = kT0 + absl::Seconds(7);
  ASSERT_TRUE(scheduler_->Report(report, kT0 + absl::Seconds(8)).ok());
  m = scheduler_->TakeMutation();
  ASSERT_EQ(m.events.size(), 1u);
  EXPECT_EQ(m.events[0].type, EventType::kRunning);
}

TEST_F(LeaseTest, UpsertNodesRefusesOrKeepsTheStateOfAnExistingNode) {
  Node node = MakeNodes(1, 2, 2)[0];
  ASSERT_TRUE(
      scheduler_->SetNodeState(node.spec.id, NodeState::kCordoned, "x", now_)
          .ok());
  node.state = NodeState::kReady;
  auto refused = scheduler_->UpsertNodes({node}, now_,
                                         Scheduler::ExistingNodeState::kRefuse);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("nodes[0].state: node \"H100-0000\" is CORDONED"));
  EXPECT_THAT(refused.status().message(), HasSubstr("SetNodeState"));
  // The same state is accepted; kKeep (the --fleet file) ignores the state.
  node.state = NodeState::kCordoned;
  node.spec.address = "10.0.0.1";
  EXPECT_TRUE(
      scheduler_
          ->UpsertNodes({node}, now_, Scheduler::ExistingNodeState::kRefuse)
          .ok());
  node.state = NodeState::kReady;
  auto kept = scheduler_->UpsertNodes({node}, now_);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ((*kept)[0].state, NodeState::kCordoned);
  const int slot = scheduler_->fleet().Find(node.spec.id);
  EXPECT_EQ(scheduler_->fleet().slots()[slot].node.spec.address, "10.0.0.1");
}

}  // namespace
}  // namespace phalanx::core
