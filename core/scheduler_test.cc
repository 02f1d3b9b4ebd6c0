#include "core/scheduler.h"

#include <limits>
#include <set>
#include <string>

#include "core/memory_store.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::HasSubstr;
using testing::kT0;
using testing::MakeNodes;
using testing::Spec;

Config LevelsConfig() {
  Config config;
  config.topology_levels = {"block", "rack"};
  return config;
}

class SchedulerTest : public testing::SchedulerFixture {
 protected:
  SchedulerTest() {
    Init(LevelsConfig(), MakeNodes(1, 2, 2), {testing::MakeQueue("llm")});
  }
};

TEST_F(SchedulerTest, SubmitThenCycleAdmitsWithAPlacementAndEvents) {
  GangPtr gang = Submit(Spec("llm").Pods(2, 8).Required("rack"));
  EXPECT_EQ(gang->id, GangId("g-000001"));
  EXPECT_EQ(gang->state, GangState::kPending);
  Cycle();
  GangPtr admitted = Get(gang);
  ASSERT_EQ(admitted->state, GangState::kAdmitted);
  ASSERT_EQ(admitted->placement.size(), 2u);
  EXPECT_NE(admitted->placement[0].node, admitted->placement[1].node);
  Mutation m = scheduler_->TakeMutation();
  ASSERT_EQ(m.events.size(), 2u);
  EXPECT_EQ(m.events[0].type, EventType::kSubmitted);
  EXPECT_EQ(m.events[1].type, EventType::kAdmitted);
  EXPECT_LT(m.events[0].revision, m.events[1].revision);
  EXPECT_EQ(m.meta.last_revision, m.events[1].revision);
}

TEST_F(SchedulerTest, TooBigGangWaitsWithReasonUntilCancelFreesRoom) {
  GangPtr small = Submit(Spec("llm").Pods(1, 8));
  Cycle();
  GangPtr big = Submit(Spec("llm").Pods(4, 8).Required("block"));
  Cycle();
  EXPECT_EQ(Get(big)->state, GangState::kPending);
  EXPECT_TRUE(Get(big)->placement.empty());
  EXPECT_EQ(Get(big)->reason,
            "RESERVED: 4 nodes in b0 are held for it until 8 GPUs are released "
            "(NO_FIT at "
            "level block: largest free block fits 3 of 4 pods)");
  Cycle();  // skipped at the same capacity epoch: the reason stands
  EXPECT_EQ(Get(big)->reason,
            "RESERVED: 4 nodes in b0 are held for it until 8 GPUs are released "
            "(NO_FIT at "
            "level block: largest free block fits 3 of 4 pods)");
  ASSERT_TRUE(scheduler_->Cancel(small->id, "done", now_).ok());
  Cycle();
  EXPECT_EQ(Get(big)->state, GangState::kAdmitted);
  EXPECT_EQ(Get(big)->placement.size(), 4u);
}

TEST_F(SchedulerTest, HigherPriorityIsAdmittedFirst) {
  GangPtr low = Submit(Spec("llm").Pods(3, 8));
  GangPtr high = Submit(Spec("llm").Pods(3, 8).Priority(5));
  Cycle();
  EXPECT_EQ(Get(high)->state, GangState::kAdmitted);
  EXPECT_EQ(Get(low)->state, GangState::kPending);
  auto explanation = scheduler_->Explain(low->id);
  ASSERT_TRUE(explanation.ok());
  EXPECT_EQ(explanation->position, 1);
  EXPECT_EQ(explanation->position_in_queue, 1);
}

TEST_F(SchedulerTest, RepeatedRequestIdReturnsTheFirstGang) {
  GangPtr first = Submit(Spec("llm").Pods(1, 8).RequestId("r1"));
  auto again = scheduler_->Submit(Spec("llm").Pods(1, 8).RequestId("r1"), now_);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->gang->id, first->id);
  auto other = scheduler_->Submit(Spec("llm").Pods(2, 8).RequestId("r1"), now_);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(other.status().message(), HasSubstr("g-000001"));
}

TEST_F(SchedulerTest, BadSubmitsNameTheFieldAndStoreNothing) {
  scheduler_->TakeMutation();
  struct Case {
    GangSpec spec;
    absl::StatusCode code;
    std::string message;
  };
  std::vector<Case> cases = {
      {Spec("nope").Pods(1, 8), absl::StatusCode::kNotFound,
       "spec.queue: no queue \"nope\""},
      {Spec("llm").Pods(0, 8), absl::StatusCode::kInvalidArgument,
       "spec.pod_sets[0].count: must be > 0"},
      {Spec("llm").Pods(1, 8).Pods(-2, 8), absl::StatusCode::kInvalidArgument,
       "spec.pod_sets[1].count: must be > 0"},
      {Spec("llm").Pods(1, 8).Required("zone"),
       absl::StatusCode::kInvalidArgument,
       "spec.pod_sets[0].topology.level: unknown level \"zone\" (levels: "
       "block, rack, node)"},
      {Spec("llm").Pods(1, 16), absl::StatusCode::kFailedPrecondition,
       "spec: can never fit: the largest node has 8 GPUs; a pod needs 16"},
      {Spec("llm").Pods(3, 8).Required("rack"),
       absl::StatusCode::kFailedPrecondition,
       "spec: can never fit: the largest rack holds 2 of 3 pods of 8 GPUs"},
      {Spec("llm"), absl::StatusCode::kInvalidArgument,
       "spec.pod_sets: must not be empty"},
  };
  for (const Case& c : cases) {
    auto result = scheduler_->Submit(c.spec, now_);
    EXPECT_EQ(result.status().code(), c.code) << c.message;
    EXPECT_EQ(result.status().message(), c.message);
  }
  EXPECT_TRUE(scheduler_->TakeMutation().empty());
}

TEST_F(SchedulerTest, ReportsFollowTheLifecycle) {
  GangPtr gang = Submit(Spec("llm").Pods(1, 8));
  auto early =
      scheduler_->Report({gang->id, GangState::kRunning, {}, false, ""}, now_);
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);
  Cycle();
  ASSERT_TRUE(
      scheduler_->Report({gang->id, GangState::kRunning, {}, false, ""}, now_)
          .ok());
  EXPECT_EQ(Get(gang)->state, GangState::kRunning);
  auto done = scheduler_->Report(
      {gang->id, GangState::kSucceeded, {}, false, "ok"}, now_);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ((*done)->state, GangState::kSucceeded);
  // The last placement stays on the finished gang, released.
  EXPECT_EQ((*done)->placement.size(), 1u);
  EXPECT_TRUE((*done)->placement_released);
  EXPECT_EQ(scheduler_->Usage(QueueName("llm")).active, 0);
  EXPECT_EQ(scheduler_->fleet().slots()[0].FreeGpus(), 8);
}

// Eviction when repair is impossible: core/repair_test.cc.
TEST_F(SchedulerTest, UnhealthyNodeRepairsAGangThatFitsElsewhere) {
  GangPtr gang = Submit(Spec("llm").Pods(1, 8));
  Cycle();
  const NodeId node = Get(gang)->placement[0].node;
  ASSERT_TRUE(
      scheduler_->SetNodeState(node, NodeState::kUnhealthy, "xid 79", now_)
          .ok());
  EXPECT_EQ(Get(gang)->state, GangState::kAdmitted);  // repaired in place
  EXPECT_NE(Get(gang)->placement[0].node, node);
  EXPECT_EQ(Get(gang)->attempts, 1);
}

TEST_F(SchedulerTest, HeldQueueAdmitsNothing) {
  Queue held = scheduler_->queues().at(QueueName("llm"));
  held.held = true;
  ASSERT_TRUE(scheduler_->PutQueue(held).ok());
  GangPtr gang = Submit(Spec("llm").Pods(1, 8));
  Cycle();
  EXPECT_EQ(Get(gang)->state, GangState::kPending);
  EXPECT_THAT(Get(gang)->reason, HasSubstr("QUEUE_HELD"));
}

TEST_F(SchedulerTest, RestoreRebuildsCapacityFromPlacements) {
  MemoryStore store;
  Submit(Spec("llm").Pods(3, 8).RequestId("a"));
  Cycle();
  ASSERT_TRUE(store.Commit(scheduler_->TakeMutation()).ok());
  auto restored = Scheduler::Restore(*store.LoadAll(), now_);
  ASSERT_TRUE(restored.ok()) << restored.status();
  Scheduler& s = **restored;
  int free = 0;
  for (const Fleet::Slot& slot : s.fleet().slots()) free += slot.FreeGpus();
  EXPECT_EQ(free, 8);
  auto again = s.Submit(Spec("llm").Pods(3, 8).RequestId("a"), now_);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  auto next = s.Submit(Spec("llm").Pods(1, 8), now_);
  EXPECT_EQ(next->gang->id, GangId("g-000002"));
}

TEST_F(SchedulerTest, RestoreRefusesAGpuHeldTwice) {
  MemoryStore store;
  Submit(Spec("llm").Pods(1, 8));
  Cycle();
  ASSERT_TRUE(store.Commit(scheduler_->TakeMutation()).ok());
  LoadedState state = *store.LoadAll();
  Gang copy = state.gangs[0];
  copy.id = GangId("g-000099");
  state.gangs.push_back(copy);
  auto restored = Scheduler::Restore(state, now_);
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(restored.status().message(), HasSubstr("refusing to start"));
}

// Found by tests/fuzz/record_fuzzer: a damaged node record with 2^30 GPUs made
// Restore size the free index by it and run out of memory.
TEST_F(SchedulerTest, RestoreRefusesANodeThatFailsValidation) {
  MemoryStore store;
  ASSERT_TRUE(store.Commit(scheduler_->TakeMutation()).ok());
  LoadedState state = *store.LoadAll();
  ASSERT_FALSE(state.nodes.empty());
  state.nodes[0].spec.gpu_count = 1 << 30;
  auto restored = Scheduler::Restore(state, now_);
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(restored.status().message(), HasSubstr("node.gpu_count"));
}

// Found by tests/fuzz/record_fuzzer: a stored gang REQUIRED at a level the
// fleet does not have aborted the first cycle after Restore (placement's
// check).
TEST_F(SchedulerTest, RestoreRefusesAGangAtAnUnknownLevel) {
  MemoryStore store;
  Submit(Spec("llm").Pods(1, 8));
  ASSERT_TRUE(store.Commit(scheduler_->TakeMutation()).ok());
  LoadedState state = *store.LoadAll();
  ASSERT_EQ(state.gangs.size(), 1u);
  state.gangs[0].spec.pod_sets[0].topology = {TopologyMode::kRequired, ""};
  auto restored = Scheduler::Restore(state, now_);
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(restored.status().message(),
              HasSubstr("pod_sets[0].topology.level: unknown level"));
}

// Found by tests/fuzz/record_fuzzer: a damaged meta record with last_revision
// 2^63-1 overflowed the retention window's arithmetic in the first cycle.
TEST_F(SchedulerTest, RestoreRefusesMetaCountersOutOfRange) {
  MemoryStore store;
  ASSERT_TRUE(store.Commit(scheduler_->TakeMutation()).ok());
  const LoadedState good = *store.LoadAll();
  ASSERT_TRUE(Scheduler::Restore(good, now_).ok());
  struct Case {
    Meta meta;
    const char* field;
  };
  const int64_t max = std::numeric_limits<int64_t>::max();
  const Case cases[] = {
      {{max, 1, 1}, "meta.last_revision"},
      {{-1, 1, 1}, "meta.last_revision"},
      {{5, 0, 1}, "meta.next_gang_seq"},
      {{5, max, 1}, "meta.next_gang_seq"},
      {{5, 1, 0}, "meta.first_retained_revision"},
      {{5, 1, 7}, "meta.first_retained_revision"},
  };
  for (const Case& c : cases) {
    LoadedState state = good;
    state.meta = c.meta;
    auto restored = Scheduler::Restore(state, now_);
    EXPECT_EQ(restored.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(restored.status().message(), HasSubstr(c.field));
  }
}

TEST_F(SchedulerTest, RetentionTrimsFinishedGangs) {
  Config config = scheduler_->config();
  config.retention.finished_gangs = 1;
  ASSERT_TRUE(scheduler_->UpdateConfig(config, std::nullopt).ok());
  GangPtr a = Submit(Spec("llm").Pods(1, 8));
  GangPtr b = Submit(Spec("llm").Pods(1, 8));
  ASSERT_TRUE(scheduler_->Cancel(a->id, "", now_).ok());
  now_ += absl::Seconds(1);
  ASSERT_TRUE(scheduler_->Cancel(b->id, "", now_).ok());
  Cycle();
  EXPECT_EQ(scheduler_->FindGang(a->id), nullptr);
  EXPECT_NE(scheduler_->FindGang(b->id), nullptr);
  Mutation m = scheduler_->TakeMutation();
  EXPECT_EQ(m.gangs_deleted, std::vector<GangId>{a->id});
}

TEST_F(SchedulerTest, RemoveNodeRefusesWhileItHoldsAGang) {
  GangPtr gang = Submit(Spec("llm").Pods(1, 8));
  Cycle();
  const NodeId node = Get(gang)->placement[0].node;
  EXPECT_EQ(scheduler_->RemoveNode(node).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(scheduler_->Cancel(gang->id, "", now_).ok());
  EXPECT_TRUE(scheduler_->RemoveNode(node).ok());
}

TEST(SchedulerDeterminismTest, SameCommandsGiveSamePlacements) {
  auto run = []() {
    Scheduler s(LevelsConfig());
    EXPECT_TRUE(s.UpsertNodes(MakeNodes(2, 4, 4)).ok());
    for (const char* name : {"a", "b", "c"}) {
      Queue q;
      q.name = QueueName(name);
      EXPECT_TRUE(s.PutQueue(q).ok());
    }
    absl::Time t = kT0;
    std::vector<std::vector<PodPlacement>> placements;
    for (int i = 0; i < 60; ++i) {
      const char* queue = i % 3 == 0 ? "a" : i % 3 == 1 ? "b" : "c";
      EXPECT_TRUE(
          s.Submit(Spec(queue).Pods(1 + i % 5, 1 << (i % 4)).Priority(i % 2), t)
              .ok());
      if (i % 7 == 0) s.RunCycle(t += absl::Seconds(1));
    }
    s.RunCycle(t += absl::Seconds(1));
    std::vector<std::pair<std::string, std::vector<PodPlacement>>> out;
    for (const GangPtr& g : s.TakeMutation().gangs_put) {
      out.emplace_back(g->id.value(), g->placement);
    }
    return out;
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace phalanx::core

namespace phalanx::core {
namespace {

class PriorityRulesTest : public SchedulerTest {
 protected:
  PriorityRulesTest() {
    Config config = LevelsConfig();
    config.priority_classes = {{"production", 1000}, {"batch", 0}};
    EXPECT_TRUE(scheduler_->UpdateConfig(config, std::nullopt).ok());
    Queue capped;
    capped.name = QueueName("capped");
    capped.max_priority = 100;
    EXPECT_TRUE(scheduler_->PutQueue(capped).ok());
    scheduler_->TakeMutation();
  }

  absl::Status SubmitStatus(GangSpec spec) {
    return scheduler_->Submit(std::move(spec), now_, "owner").status();
  }
};

TEST_F(PriorityRulesTest, APriorityClassSetsThePriority) {
  GangSpec spec = Spec("llm").Pods(1, 8);
  spec.priority_class = "production";
  auto result = scheduler_->Submit(spec, now_, "team-a");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->gang->spec.priority, 1000);
  EXPECT_EQ(result->gang->spec.priority_class, "production");
  EXPECT_EQ(result->gang->owner, "team-a");
}

TEST_F(PriorityRulesTest, UnknownOrContradictedClassesAreRefused) {
  GangSpec unknown = Spec("llm").Pods(1, 8);
  unknown.priority_class = "urgent";
  EXPECT_THAT(SubmitStatus(unknown).message(),
              HasSubstr("spec.priority_class: no priority class \"urgent\""));
  GangSpec contradicted = Spec("llm").Pods(1, 8);
  contradicted.priority_class = "batch";
  contradicted.priority = 5;
  EXPECT_EQ(SubmitStatus(contradicted).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(scheduler_->TakeMutation().empty());
}

TEST_F(PriorityRulesTest, MaxPriorityRefusesGangsAboveIt) {
  GangSpec at = Spec("capped").Pods(1, 8);
  at.priority = 100;
  EXPECT_TRUE(SubmitStatus(at).ok());
  scheduler_->TakeMutation();
  GangSpec above = Spec("capped").Pods(1, 8);
  above.priority = 101;
  const absl::Status status = SubmitStatus(above);
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(), HasSubstr("max_priority 100"));
  GangSpec by_class = Spec("capped").Pods(1, 8);
  by_class.priority_class = "production";
  EXPECT_EQ(SubmitStatus(by_class).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(scheduler_->DryRun(by_class).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(scheduler_->TakeMutation().empty());
}

}  // namespace
}  // namespace phalanx::core

namespace phalanx::core {
namespace {

// Found by record_fuzzer: a damaged stored gang with a pod set of 0 pods
// broke placement's invariant (a CHECK in PackLeastFree) on the first cycle.
TEST_F(SchedulerTest, RestoreRefusesAWaitingGangOfNoPods) {
  MemoryStore store;
  Submit(Spec("llm").Pods(1, 8));
  ASSERT_TRUE(store.Commit(scheduler_->TakeMutation()).ok());
  LoadedState state = *store.LoadAll();
  ASSERT_EQ(state.gangs.size(), 1u);
  state.gangs[0].spec.pod_sets[0].count = 0;
  state.gangs[0].spec.pod_sets[0].gpus = 58;
  auto restored = Scheduler::Restore(state, now_);
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(restored.status().message(), HasSubstr("gang g-000001"));
}

Queue NamedQueue(const char* name, const char* parent) {
  Queue q;
  q.name = QueueName(name);
  q.parent = QueueName(parent);
  return q;
}

TEST(PutQueuesParentsFirstTest, PutsChildrenGivenBeforeTheirParents) {
  Scheduler s(LevelsConfig());
  ASSERT_TRUE(PutQueuesParentsFirst(
                  s, {NamedQueue("leaf", "mid"), NamedQueue("mid", "root"),
                      NamedQueue("root", "")})
                  .ok());
  EXPECT_EQ(s.queues().size(), 3u);
  EXPECT_EQ(s.queues().at(QueueName("leaf")).parent, QueueName("mid"));
  // Putting the same queues again changes nothing and succeeds.
  EXPECT_TRUE(PutQueuesParentsFirst(s, {NamedQueue("leaf", "mid")}).ok());
}

TEST(PutQueuesParentsFirstTest, AMissingParentIsNotFoundAndARefusalNamed) {
  Scheduler s(LevelsConfig());
  EXPECT_TRUE(absl::IsNotFound(
      PutQueuesParentsFirst(s, {NamedQueue("orphan", "nowhere")})));
  Queue bad = NamedQueue("bad", "");
  bad.weight = -1;
  absl::Status refused = PutQueuesParentsFirst(s, {bad});
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(refused.message(), HasSubstr("queue \"bad\": "));
}

}  // namespace
}  // namespace phalanx::core
