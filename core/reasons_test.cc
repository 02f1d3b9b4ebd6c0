// Pending reasons that are true now (the early stop of a full fleet, lost
// reservations), never-fit gangs accepted with accept_unfit_gangs, and
// idempotency that outlives retention (tombstones, released placements).
#include <map>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
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
using ::testing::StartsWith;

class ReasonsTest : public testing::SchedulerFixture {
 protected:
  void Init(Config config, int nodes = 2) {
    config.topology_levels = {"block", "rack"};
    SchedulerFixture::Init(config, MakeNodes(1, 1, nodes),
                           {testing::MakeQueue("q")});
  }
};

TEST_F(ReasonsTest, AFullFleetNamesTheSharedCauseForGangsNotReached) {
  Config one;  // one reservation, no preemption: the early stop is reached
  one.reservation.depth = 1;
  one.preemption.enabled = false;
  Init(one);
  Submit(Spec("q").Pods(2, 8));
  Cycle();  // the fleet is full; the reservation depth (1) is free
  GangPtr head = Submit(Spec("q").Pods(2, 8).Priority(5));
  Cycle();  // the head reserves: depth reached, nothing free
  ASSERT_EQ(scheduler_->reservations().size(), 1u);
  GangPtr late = Submit(Spec("q").Pods(1, 8));
  EXPECT_EQ(Get(late)->reason, kWaitingReason);
  Cycle();
  EXPECT_EQ(Get(late)->reason, kNoFreeGpuReason);
  EXPECT_THAT(Get(head)->reason, StartsWith("RESERVED: "));
  // Reservations off at run time: the head loses its RESERVED reason even
  // though the cycle stops before reaching it again.
  Config config = scheduler_->config();
  config.reservation.depth = 0;
  ASSERT_TRUE(scheduler_->UpdateConfig(config, std::nullopt).ok());
  Cycle();
  EXPECT_TRUE(scheduler_->reservations().empty());
  EXPECT_THAT(Get(head)->reason, ::testing::Not(StartsWith("RESERVED")));
  EXPECT_FALSE(Get(head)->reason.empty());
  // A stalled cycle writes nothing more once the reasons are stamped.
  Cycle();
  scheduler_->TakeMutation();
  Cycle();
  EXPECT_TRUE(scheduler_->TakeMutation().gangs_put.empty());
}

// A group the stalled cycle stamped once is not visited again in full: only
// its members that joined (or changed reason) since get the stamp — and
// they do get it.
TEST_F(ReasonsTest, AGangJoiningAStampedGroupGetsTheSharedCause) {
  Config config;
  config.reservation.depth = 0;
  Init(config);
  Submit(Spec("q").Pods(2, 8));
  Cycle();  // the fleet is full
  GangPtr first = Submit(Spec("q").Pods(1, 8));
  GangPtr second = Submit(Spec("q").Pods(1, 8));
  Cycle();
  EXPECT_EQ(Get(first)->reason, kNoFreeGpuReason);
  EXPECT_EQ(Get(second)->reason, kNoFreeGpuReason);
  GangPtr joined = Submit(Spec("q").Pods(1, 8));
  EXPECT_EQ(Get(joined)->reason, kWaitingReason);
  scheduler_->TakeMutation();
  Cycle();
  EXPECT_EQ(Get(joined)->reason, kNoFreeGpuReason);
  EXPECT_EQ(Get(first)->reason, kNoFreeGpuReason);
  // Only the joined gang was rewritten.
  const Mutation mutation = scheduler_->TakeMutation();
  ASSERT_EQ(mutation.gangs_put.size(), 1u);
  EXPECT_EQ(mutation.gangs_put[0]->id, joined->id);
}

// The stored state of `s`, as a restart loads it.
LoadedState LoadedStateOf(const Scheduler& s) {
  LoadedState state;
  state.config = s.config();
  for (const Fleet::Slot& slot : s.fleet().slots()) {
    state.nodes.push_back(slot.node);
  }
  for (const auto& [name, queue] : s.queues()) state.queues.push_back(queue);
  for (const auto& [id, g] : s.gangs()) state.gangs.push_back(*g);
  state.meta.next_gang_seq = 100;
  return state;
}

// After a restart, a group whose stored reasons are all NO_FIT is known to
// keep any stamp: the first stalled cycle visits only what joined since
// (and still gives it the shared cause), not every pending gang.
TEST_F(ReasonsTest, ARestartKeepsTheStampOfGroupsThatAllSayNoFit) {
  Config config;
  config.reservation.depth = 0;
  config.preemption.enabled = false;
  Init(config);
  Submit(Spec("q").Pods(1, 8));
  Cycle();  // one node of two is taken
  std::vector<GangPtr> wide;
  for (int i = 0; i < 3; ++i) wide.push_back(Submit(Spec("q").Pods(2, 8)));
  Cycle();  // 8 GPUs free, 16 asked: NO_FIT
  Submit(Spec("q").Pods(1, 8).Priority(5));
  Cycle();  // the fleet is full: later cycles stop before the wide group
  for (const GangPtr& gang : wide) {
    ASSERT_THAT(Get(gang)->reason, StartsWith("NO_FIT"));
  }
  auto restored = Scheduler::Restore(LoadedStateOf(*scheduler_), now_);
  ASSERT_TRUE(restored.ok()) << restored.status();
  scheduler_ = *std::move(restored);
  const PendingGroup* group = GroupOf(wide[0]);
  ASSERT_NE(group, nullptr);
  EXPECT_TRUE(group->keeps_any_stamp);
  GangPtr joined = Submit(Spec("q").Pods(2, 8));
  ASSERT_EQ(GroupOf(joined), group);
  scheduler_->TakeMutation();
  Cycle();
  EXPECT_EQ(Get(joined)->reason, kNoFreeGpuReason);
  for (const GangPtr& gang : wide) {
    EXPECT_THAT(Get(gang)->reason, StartsWith("NO_FIT"));
  }
  Mutation mutation = scheduler_->TakeMutation();
  ASSERT_EQ(mutation.gangs_put.size(), 1u);
  EXPECT_EQ(mutation.gangs_put[0]->id, joined->id);
  EXPECT_FALSE(group->keeps_any_stamp);
  EXPECT_EQ(group->stamped, kNoFreeGpuReason);
  // A group with another reason stored (a gang no cycle looked at yet) is
  // walked once after a restart, and the walk writes that gang only.
  GangPtr waiting = Submit(Spec("q").Pods(2, 8));
  EXPECT_EQ(Get(waiting)->reason, kWaitingReason);
  restored = Scheduler::Restore(LoadedStateOf(*scheduler_), now_);
  ASSERT_TRUE(restored.ok()) << restored.status();
  scheduler_ = *std::move(restored);
  EXPECT_FALSE(GroupOf(waiting)->keeps_any_stamp);
  scheduler_->TakeMutation();
  Cycle();
  EXPECT_EQ(Get(waiting)->reason, kNoFreeGpuReason);
  mutation = scheduler_->TakeMutation();
  ASSERT_EQ(mutation.gangs_put.size(), 1u);
  EXPECT_EQ(mutation.gangs_put[0]->id, waiting->id);
}

TEST_F(ReasonsTest, NeverFitsIsRefusedOrAcceptedAndCheckedAgainOnNewNodes) {
  Init({});
  auto refused = scheduler_->Submit(Spec("q").Pods(1, 16), now_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "spec: can never fit: the largest node has 8 GPUs; a pod needs 16");
  Config config = scheduler_->config();
  config.admission.accept_unfit_gangs = true;
  ASSERT_TRUE(scheduler_->UpdateConfig(config, std::nullopt).ok());
  GangPtr big = Submit(Spec("q").Pods(1, 16));
  EXPECT_EQ(big->reason,
            "NEVER_FITS: the largest node has 8 GPUs; a pod needs 16 "
            "(checked again when nodes change)");
  auto dry = scheduler_->DryRun(Spec("q").Pods(1, 16));
  ASSERT_TRUE(dry.ok());
  EXPECT_FALSE(dry->placed);
  EXPECT_THAT(dry->reason, StartsWith("NEVER_FITS: "));
  Cycle();
  EXPECT_EQ(Get(big)->state, GangState::kPending);
  EXPECT_THAT(Get(big)->reason, StartsWith("NEVER_FITS: "));
  EXPECT_TRUE(scheduler_->reservations().empty());
  Node node;
  node.spec.id = NodeId("big");
  node.spec.gpu_model = "H100";
  node.spec.gpu_count = 16;
  node.spec.labels = {{"block", "b0"}, {"rack", "r0-9"}};
  ASSERT_TRUE(scheduler_->UpsertNodes({node}, now_).ok());
  Cycle();
  EXPECT_EQ(Get(big)->state, GangState::kAdmitted);
  EXPECT_EQ(Get(big)->placement[0].node, NodeId("big"));
}

TEST_F(ReasonsTest, AFinishedGangKeepsItsPlacementReleased) {
  Init({});
  GangPtr gang = Submit(Spec("q").Pods(2, 8));
  Cycle();
  ASSERT_EQ(Get(gang)->state, GangState::kAdmitted);
  ASSERT_TRUE(scheduler_->Cancel(gang->id, "done", now_).ok());
  EXPECT_EQ(Get(gang)->placement.size(), 2u);
  EXPECT_TRUE(Get(gang)->placement_released);
  // Nothing treats it as holding GPUs: the same nodes go to the next gang,
  // and a restart from the stored state accepts it.
  GangPtr next = Submit(Spec("q").Pods(2, 8));
  Cycle();
  EXPECT_EQ(Get(next)->state, GangState::kAdmitted);
  LoadedState state;
  state.config = scheduler_->config();
  for (const Fleet::Slot& slot : scheduler_->fleet().slots()) {
    state.nodes.push_back(slot.node);
  }
  for (const auto& [name, queue] : scheduler_->queues()) {
    state.queues.push_back(queue);
  }
  for (const auto& [id, g] : scheduler_->gangs()) state.gangs.push_back(*g);
  state.meta.next_gang_seq = 10;
  auto restored = Scheduler::Restore(std::move(state), now_);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE((*restored)->FindGang(gang->id)->placement_released);
}

// Property: whatever retention does (count and age, random finishes,
// cancels and cycles), a retried submit with a live request key returns the
// gang the first submit made, and Get still finds it.
TEST(IdempotencyPropertyTest, ARetriedSubmitAlwaysReturnsTheOriginalGang) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    Config config;
    config.topology_levels = {"block", "rack"};
    config.retention.finished_gangs = static_cast<int64_t>(rng() % 3);
    config.retention.finished_gang_age = absl::Minutes(1 + rng() % 5);
    config.idempotency_retention = absl::Minutes(30);
    Scheduler s(config);
    ASSERT_TRUE(s.UpsertNodes(MakeNodes(1, 1, 2), kT0).ok());
    Queue queue;
    queue.name = QueueName("q");
    ASSERT_TRUE(s.PutQueue(queue).ok());
    absl::Time now = kT0;
    std::map<std::string, std::pair<GangSpec, GangId>> first;  // by key
    for (int step = 0; step < 80; ++step) {
      now += absl::Seconds(20);
      const std::string key = absl::StrCat("r-", rng() % 12);
      GangSpec spec = Spec("q").Pods(1 + rng() % 2, 8).RequestId(key);
      if (auto it = first.find(key); it != first.end()) spec = it->second.first;
      auto result = s.Submit(spec, now);
      ASSERT_TRUE(result.ok()) << "seed " << seed << ": " << result.status();
      auto [it, added] = first.try_emplace(key, spec, result->gang->id);
      if (!added) {
        EXPECT_FALSE(result->created);
        EXPECT_EQ(result->gang->id, it->second.second) << "seed " << seed;
        EXPECT_NE(s.FindGang(it->second.second), nullptr) << "seed " << seed;
      }
      s.RunCycle(now);
      // Finish or cancel a random gang.
      std::vector<GangId> ids;
      for (const auto& [id, gang] : s.gangs()) {
        if (!IsFinal(gang->state)) ids.push_back(id);
      }
      std::sort(ids.begin(), ids.end());
      if (!ids.empty()) {
        const GangId id = ids[rng() % ids.size()];
        if (HoldsCapacity(s.FindGang(id)->state) && rng() % 2) {
          ASSERT_TRUE(
              s.Report({id, GangState::kSucceeded, {}, false, ""}, now).ok());
        } else {
          ASSERT_TRUE(s.Cancel(id, "x", now).ok());
        }
      }
      s.RunCycle(now += absl::Seconds(1));
    }
  }
}

}  // namespace
}  // namespace phalanx::core
