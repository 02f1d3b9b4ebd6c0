// Node failure and drain deadlines (docs/design.md §3, §6): repair in place, or
// eviction and requeue in the old place in line.
#include "core/repair.h"

#include <string>
#include <vector>

#include "core/memory_store.h"
#include "core/scheduler.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::ElementsAre;
using testing::kT0;
using testing::MakeNodes;
using testing::Spec;
using ::testing::StartsWith;

PodPlacement Pod(int index, const std::string& node, std::vector<int> gpus) {
  return PodPlacement{"set-0", index, NodeId(node), std::move(gpus)};
}
const std::vector<int> kAll = {0, 1, 2, 3, 4, 5, 6, 7};
const std::vector<int> kLow = {0, 1, 2, 3};
const std::vector<int> kHigh = {4, 5, 6, 7};

// One block of `racks` racks of `nodes` nodes of 8 H100 GPUs ("H100-0<r><nn>"),
// levels block/rack, and queue "q".
class RepairTest : public testing::SchedulerFixture {
 protected:
  void Init(int racks, int nodes, Config config = {}) {
    config.topology_levels = {"block", "rack"};
    SchedulerFixture::Init(config, MakeNodes(1, racks, nodes),
                           {testing::MakeQueue("q")});
  }
  absl::Status Fail(const std::string& node) {
    return scheduler_
        ->SetNodeState(NodeId(node), NodeState::kUnhealthy, "xid 79", now_)
        .status();
  }
  std::vector<Event> TakeEvents() { return scheduler_->TakeMutation().events; }
  const Node& NodeOf(const std::string& id) {
    return scheduler_->fleet()
        .slots()[scheduler_->fleet().Find(NodeId(id))]
        .node;
  }
};

TEST_F(RepairTest, RequiredRackRepairStaysInTheRackOnTheTightestNode) {
  Init(2, 4);
  GangPtr small = Submit(Spec("q").Pods(1, 4));  // H100-0000, GPUs 0-3
  Cycle();
  GangPtr gang = Submit(Spec("q").Pods(3, 4).Required("rack"));
  Cycle();
  const GangPtr admitted = Get(gang);
  ASSERT_THAT(admitted->placement,
              ElementsAre(Pod(0, "H100-0001", kLow), Pod(1, "H100-0001", kHigh),
                          Pod(2, "H100-0000", kHigh)));
  TakeEvents();

  ASSERT_TRUE(Fail("H100-0000").ok());
  // Same priority: the older gang moves first, onto the least-free node;
  // the rack-bound pod then takes the rest of that node, so H100-0003
  // stays whole.
  const std::vector<Event> events = TakeEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, EventType::kRepaired);
  EXPECT_EQ(events[0].gang->id, small->id);
  EXPECT_THAT(events[0].gang->placement,
              ElementsAre(Pod(0, "H100-0002", kLow)));
  EXPECT_EQ(events[1].type, EventType::kRepaired);
  EXPECT_EQ(events[1].gang->id, gang->id);
  EXPECT_THAT(events[1].gang->placement,
              ElementsAre(Pod(0, "H100-0001", kLow), Pod(1, "H100-0001", kHigh),
                          Pod(2, "H100-0002", kHigh)));
  const GangPtr repaired = Get(gang);
  EXPECT_EQ(repaired->state, GangState::kAdmitted);
  EXPECT_EQ(repaired->attempts, 1);
  EXPECT_EQ(repaired->admit_time, admitted->admit_time);
  EXPECT_EQ(repaired->placement, events[1].gang->placement);
  EXPECT_EQ(scheduler_->vacate_counts(),
            (Scheduler::VacateCounts{{{"repaired", "unhealthy"}, 2}}));
  EXPECT_EQ(scheduler_->Usage(QueueName("q")).held_gpus.at("H100"), 16);
}

TEST_F(RepairTest, FullRackEvictsAndRequeuesInTheOldPlaceInLine) {
  Init(2, 2);
  GangPtr gang = Submit(Spec("q").Pods(2, 8).Required("rack"));
  GangPtr other = Submit(Spec("q").Pods(1, 8));
  Cycle();
  ASSERT_THAT(Get(gang)->placement, ElementsAre(Pod(0, "H100-0000", kAll),
                                                Pod(1, "H100-0001", kAll)));
  ASSERT_THAT(Get(other)->placement, ElementsAre(Pod(0, "H100-0100", kAll)));
  GangPtr later = Submit(Spec("q").Pods(2, 8).Required("rack"));
  Cycle();
  ASSERT_EQ(Get(later)->state, GangState::kPending);
  TakeEvents();

  ASSERT_TRUE(Fail("H100-0000").ok());
  const std::vector<Event> events = TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kEvicted);
  const GangPtr evicted = Get(gang);
  EXPECT_EQ(evicted->state, GangState::kPending);
  EXPECT_TRUE(evicted->placement.empty());
  EXPECT_THAT(evicted->reason,
              StartsWith("EVICTED: node H100-0000 is unhealthy; not repaired: "
                         "pod set set-0: NO_FIT"));
  EXPECT_EQ(evicted->submit_time, gang->submit_time);
  EXPECT_EQ(scheduler_->Explain(gang->id)->position, 1);
  EXPECT_EQ(scheduler_->Explain(later->id)->position, 2);
  EXPECT_EQ(scheduler_->vacate_counts(),
            (Scheduler::VacateCounts{{{"evicted", "unhealthy"}, 1}}));
  int free = 0;
  for (const Fleet::Slot& slot : scheduler_->fleet().slots()) {
    free += slot.FreeGpus();
  }
  EXPECT_EQ(free, 24);  // everything but `other`
}

TEST_F(RepairTest, UnconstrainedRepairGoesToAnyRack) {
  Init(2, 2);
  GangPtr gang = Submit(Spec("q").Pods(1, 8));
  GangPtr filler = Submit(Spec("q").Pods(1, 8));
  Cycle();
  ASSERT_THAT(Get(gang)->placement, ElementsAre(Pod(0, "H100-0000", kAll)));
  ASSERT_THAT(Get(filler)->placement, ElementsAre(Pod(0, "H100-0001", kAll)));
  TakeEvents();
  ASSERT_TRUE(Fail("H100-0000").ok());
  const std::vector<Event> events = TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kRepaired);
  EXPECT_THAT(events[0].gang->placement,
              ElementsAre(Pod(0, "H100-0100", kAll)));
}

TEST_F(RepairTest, PreferredRepairLeavesAFullRackForTheBlock) {
  Init(2, 2);
  GangPtr gang = Submit(Spec("q").Pods(2, 8).Preferred("rack"));
  GangPtr half = Submit(Spec("q").Pods(1, 4));
  Cycle();
  ASSERT_THAT(Get(gang)->placement, ElementsAre(Pod(0, "H100-0000", kAll),
                                                Pod(1, "H100-0001", kAll)));
  ASSERT_THAT(Get(half)->placement, ElementsAre(Pod(0, "H100-0100", kLow)));
  TakeEvents();
  ASSERT_TRUE(Fail("H100-0000").ok());
  const std::vector<Event> events = TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kRepaired);
  EXPECT_THAT(
      events[0].gang->placement,
      ElementsAre(Pod(0, "H100-0101", kAll), Pod(1, "H100-0001", kAll)));
}

TEST_F(RepairTest, MovingGpusWithinAModelNeedsNoSpareQuota) {
  Init(1, 3);
  Queue capped = scheduler_->queues().at(QueueName("q"));
  capped.nominal_gpus = {{"H100", 16}};  // no cohort: a hard limit
  ASSERT_TRUE(scheduler_->PutQueue(capped).ok());
  GangPtr gang = Submit(Spec("q").Pods(2, 8));
  Cycle();
  ASSERT_THAT(Get(gang)->placement, ElementsAre(Pod(0, "H100-0000", kAll),
                                                Pod(1, "H100-0001", kAll)));
  ASSERT_TRUE(Fail("H100-0000").ok());
  EXPECT_THAT(Get(gang)->placement, ElementsAre(Pod(0, "H100-0002", kAll),
                                                Pod(1, "H100-0001", kAll)));
  EXPECT_EQ(scheduler_->Usage(QueueName("q")).held_gpus.at("H100"), 16);
}

TEST_F(RepairTest, AGangThatDoesNotMixModelsKeepsItsModel) {
  Init(1, 2);
  ASSERT_TRUE(
      scheduler_->UpsertNodes(MakeNodes(1, 1, 1, 8, "H200"), now_).ok());
  GangPtr gang = Submit(Spec("q").Pods(2, 8).Models({"H100", "H200"}));
  Cycle();
  ASSERT_THAT(Get(gang)->placement, ElementsAre(Pod(0, "H100-0000", kAll),
                                                Pod(1, "H100-0001", kAll)));
  TakeEvents();
  ASSERT_TRUE(Fail("H100-0000").ok());  // H200-0000 would mix models
  const std::vector<Event> events = TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kEvicted);
}

TEST_F(RepairTest, AGangMovedWholeMayTakeAnotherModelItAccepts) {
  Init(1, 1);
  ASSERT_TRUE(
      scheduler_->UpsertNodes(MakeNodes(1, 1, 1, 8, "H200"), now_).ok());
  GangPtr gang = Submit(Spec("q").Pods(1, 8).Models({"H100", "H200"}));
  Cycle();
  ASSERT_THAT(Get(gang)->placement, ElementsAre(Pod(0, "H100-0000", kAll)));
  ASSERT_TRUE(Fail("H100-0000").ok());
  EXPECT_EQ(Get(gang)->state, GangState::kAdmitted);
  EXPECT_THAT(Get(gang)->placement, ElementsAre(Pod(0, "H200-0000", kAll)));
  EXPECT_EQ(scheduler_->Usage(QueueName("q")).held_gpus.at("H200"), 8);
  EXPECT_EQ(scheduler_->Usage(QueueName("q")).held_gpus.at("H100"), 0);
}

TEST_F(RepairTest, MovedPodSetsTogetherStayWithinQuota) {
  Config config;
  config.heartbeat_timeout = absl::Minutes(1);
  config.startup_grace = absl::ZeroDuration();
  Init(1, 3, config);
  ASSERT_TRUE(
      scheduler_->UpsertNodes(MakeNodes(1, 1, 2, 8, "H200"), now_).ok());
  Queue capped = scheduler_->queues().at(QueueName("q"));
  capped.nominal_gpus = {{"H100", 16}, {"H200", 8}};  // no cohort: hard
  ASSERT_TRUE(scheduler_->PutQueue(capped).ok());
  Queue free;
  free.name = QueueName("free");
  ASSERT_TRUE(scheduler_->PutQueue(free).ok());
  GangSpec mixed = Spec("q").Pods(1, 8, "a").Pods(1, 8, "b");
  mixed.allow_mixed_models = true;
  GangPtr gang = Submit(mixed);
  GangPtr filler = Submit(Spec("free").Pods(1, 8).Models({"H100"}));
  Cycle();
  ASSERT_THAT(Get(gang)->placement,
              ElementsAre(PodPlacement{"a", 0, NodeId("H100-0000"), kAll},
                          PodPlacement{"b", 0, NodeId("H100-0001"), kAll}));
  // Both H100 nodes of the gang go silent: each pod set alone could move to
  // an H200 node within quota, both together could not.
  now_ += absl::Minutes(2);
  ASSERT_TRUE(scheduler_
                  ->Heartbeat({NodeId("H100-0002"), NodeId("H200-0000"),
                               NodeId("H200-0001")},
                              now_)
                  .ok());
  TakeEvents();
  scheduler_->RunCycle(now_);
  const std::vector<Event> events = TakeEvents();
  ASSERT_GE(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kEvicted);
  EXPECT_THAT(events[0].gang->reason,
              StartsWith("EVICTED: node H100-0000 is unhealthy; not repaired: "
                         "QUOTA: queue q would hold 8 H200 GPUs above its "
                         "nominal 8"));
}

TEST_F(RepairTest, PodsOnTwoSilentNodesMoveInOneRepairAvoidingEveryDeadNode) {
  Config config;
  config.heartbeat_timeout = absl::Minutes(1);
  config.startup_grace = absl::ZeroDuration();
  Init(2, 3, config);
  GangPtr gang = Submit(Spec("q").Pods(3, 8).Required("block"));
  Cycle();
  ASSERT_THAT(Get(gang)->placement,
              ElementsAre(Pod(0, "H100-0000", kAll), Pod(1, "H100-0001", kAll),
                          Pod(2, "H100-0002", kAll)));
  TakeEvents();
  // H100-0000, H100-0001 (the gang's) and H100-0100 (free) go silent.
  now_ += absl::Minutes(2);
  ASSERT_TRUE(scheduler_
                  ->Heartbeat({NodeId("H100-0002"), NodeId("H100-0101"),
                               NodeId("H100-0102")},
                              now_)
                  .ok());
  scheduler_->RunCycle(now_);
  const std::vector<Event> events = TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kRepaired);
  EXPECT_THAT(events[0].gang->placement,
              ElementsAre(Pod(0, "H100-0101", kAll), Pod(1, "H100-0102", kAll),
                          Pod(2, "H100-0002", kAll)));
  EXPECT_EQ(NodeOf("H100-0100").state, NodeState::kUnhealthy);
  EXPECT_EQ(scheduler_->vacate_counts(),
            (Scheduler::VacateCounts{{{"repaired", "unhealthy"}, 1}}));
}

TEST_F(RepairTest, NeverRepairsOntoANodeHeldForAPreemptor) {
  Config config;
  config.reservation.depth = 0;
  config.preemption.enabled = true;
  config.preemption.min_runtime = absl::ZeroDuration();
  Init(1, 3, config);
  GangPtr victim = Submit(Spec("q").Pods(1, 8));
  GangPtr bystander = Submit(Spec("q").Pods(1, 8));
  GangPtr failing = Submit(Spec("q").Pods(1, 8));
  Cycle();
  ASSERT_THAT(Get(victim)->placement, ElementsAre(Pod(0, "H100-0000", kAll)));
  ASSERT_THAT(Get(failing)->placement, ElementsAre(Pod(0, "H100-0002", kAll)));
  now_ += absl::Minutes(1);
  GangPtr preemptor = Submit(Spec("q").Pods(1, 8).Priority(5));
  Cycle();
  ASSERT_EQ(Get(victim)->state, GangState::kPreempting);
  // The victim stops: H100-0000 is free, and held for the preemptor.
  ASSERT_TRUE(
      scheduler_->Report({victim->id, std::nullopt, {}, true, ""}, now_).ok());
  TakeEvents();

  ASSERT_TRUE(Fail("H100-0002").ok());
  const std::vector<Event> events = TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kEvicted);
  EXPECT_EQ(Get(failing)->state, GangState::kPending);
  EXPECT_THAT(Get(failing)->reason,
              StartsWith("EVICTED: node H100-0002 is unhealthy; not repaired: "
                         "pod set set-0: NO_FIT"));
  Cycle();
  EXPECT_EQ(Get(preemptor)->state, GangState::kAdmitted);
  EXPECT_THAT(Get(preemptor)->placement,
              ElementsAre(Pod(0, "H100-0000", kAll)));
  EXPECT_EQ(Get(bystander)->state, GangState::kAdmitted);
}

TEST_F(RepairTest, RepairUsesReservedNodesOnlyToEndBeforeTheReservation) {
  Init(2, 2);
  GangSpec quick = Spec("q").Pods(1, 8);
  quick.estimated_runtime = absl::Hours(1);
  GangPtr slow = Submit(Spec("q").Pods(1, 8));  // no estimate
  GangPtr fast = Submit(quick);
  Cycle();
  ASSERT_THAT(Get(slow)->placement, ElementsAre(Pod(0, "H100-0000", kAll)));
  ASSERT_THAT(Get(fast)->placement, ElementsAre(Pod(0, "H100-0001", kAll)));
  GangPtr big = Submit(Spec("q").Pods(4, 8).Required("block"));
  Cycle();
  ASSERT_THAT(Get(big)->reason,
              StartsWith("RESERVED: 4 nodes in b0 are held for it"));
  ASSERT_TRUE(Fail("H100-0000").ok());
  EXPECT_EQ(Get(slow)->state, GangState::kPending);  // it would delay `big`
  ASSERT_TRUE(Fail("H100-0001").ok());
  EXPECT_EQ(Get(fast)->state, GangState::kAdmitted);  // backfills
  EXPECT_THAT(Get(fast)->placement, ElementsAre(Pod(0, "H100-0100", kAll)));
}

TEST_F(RepairTest, APreemptingVictimOnAFailedNodeIsRequeued) {
  Config config;
  config.reservation.depth = 0;
  config.preemption.enabled = true;
  config.preemption.min_runtime = absl::ZeroDuration();
  Init(1, 2, config);
  GangPtr victim = Submit(Spec("q").Pods(1, 8));
  GangPtr other = Submit(Spec("q").Pods(1, 8));
  Cycle();
  now_ += absl::Minutes(1);
  GangPtr preemptor = Submit(Spec("q").Pods(1, 8).Priority(5));
  Cycle();
  ASSERT_EQ(Get(victim)->state, GangState::kPreempting);
  TakeEvents();
  ASSERT_TRUE(Fail(Get(victim)->placement[0].node.value()).ok());
  const std::vector<Event> events = TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kEvicted);
  EXPECT_EQ(Get(victim)->state, GangState::kPending);
  EXPECT_THAT(Get(victim)->reason, StartsWith("EVICTED: node H100-0000 is "
                                              "unhealthy; not repaired: it is "
                                              "being preempted"));
}

TEST_F(RepairTest, DrainDeadlineFiresAtItsTimeAndNotBefore) {
  Init(1, 2);
  GangPtr gang = Submit(Spec("q").Pods(1, 8));
  Cycle();
  ASSERT_THAT(Get(gang)->placement, ElementsAre(Pod(0, "H100-0000", kAll)));
  const absl::Time deadline = now_ + absl::Minutes(10);
  auto node = scheduler_->SetNodeState(
      NodeId("H100-0000"), NodeState::kDraining, "retire", now_, deadline);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->drain_deadline, deadline);
  TakeEvents();

  scheduler_->RunCycle(deadline - absl::Seconds(1));
  EXPECT_TRUE(TakeEvents().empty());
  EXPECT_THAT(Get(gang)->placement, ElementsAre(Pod(0, "H100-0000", kAll)));

  scheduler_->RunCycle(deadline);
  const std::vector<Event> events = TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kRepaired);
  EXPECT_EQ(events[0].time, deadline);
  EXPECT_THAT(events[0].gang->placement,
              ElementsAre(Pod(0, "H100-0001", kAll)));
  EXPECT_EQ(NodeOf("H100-0000").state, NodeState::kDraining);
  EXPECT_EQ(scheduler_->vacate_counts(),
            (Scheduler::VacateCounts{{{"repaired", "drain_deadline"}, 1}}));
}

TEST_F(RepairTest, DrainDeadlineEvictsWhatCannotMove) {
  Init(1, 2);
  GangPtr gang = Submit(Spec("q").Pods(1, 8));
  GangPtr other = Submit(Spec("q").Pods(1, 8));
  Cycle();
  const absl::Time deadline = now_ + absl::Minutes(10);
  ASSERT_TRUE(scheduler_
                  ->SetNodeState(NodeId("H100-0000"), NodeState::kDraining,
                                 "retire", now_, deadline)
                  .ok());
  TakeEvents();
  scheduler_->RunCycle(deadline);
  EXPECT_EQ(Get(gang)->state, GangState::kPending);
  EXPECT_EQ(Get(other)->state, GangState::kAdmitted);
  // The cycle then gave it a pending reason; the event keeps why it left.
  const std::vector<Event> events = TakeEvents();
  ASSERT_GE(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kEvicted);
  EXPECT_THAT(events[0].gang->reason,
              StartsWith("EVICTED: node H100-0000 passed its drain deadline; "
                         "not repaired: pod set set-0: NO_FIT"));
  EXPECT_EQ(scheduler_->vacate_counts(),
            (Scheduler::VacateCounts{{{"evicted", "drain_deadline"}, 1}}));
}

TEST_F(RepairTest, UncordonCancelsTheDrainDeadline) {
  Init(1, 2);
  GangPtr gang = Submit(Spec("q").Pods(1, 8));
  Cycle();
  const absl::Time deadline = now_ + absl::Minutes(10);
  const NodeId node("H100-0000");
  ASSERT_TRUE(
      scheduler_
          ->SetNodeState(node, NodeState::kDraining, "retire", now_, deadline)
          .ok());
  auto ready = scheduler_->SetNodeState(node, NodeState::kReady, "kept", now_);
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->drain_deadline, std::nullopt);
  TakeEvents();
  scheduler_->RunCycle(deadline + absl::Hours(1));
  EXPECT_TRUE(TakeEvents().empty());
  EXPECT_THAT(Get(gang)->placement, ElementsAre(Pod(0, "H100-0000", kAll)));
}

TEST_F(RepairTest, OnlyADrainingNodeTakesADeadline) {
  Init(1, 2);
  auto result =
      scheduler_->SetNodeState(NodeId("H100-0000"), NodeState::kCordoned,
                               "maint", now_, now_ + absl::Minutes(1));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(result.status().message(),
            "drain_deadline: only a DRAINING node takes one, not CORDONED");
  EXPECT_EQ(NodeOf("H100-0000").state, NodeState::kReady);
}

TEST_F(RepairTest, OnlyANewDrainingNodeIsUpsertedWithADeadline) {
  Init(1, 1);
  std::vector<Node> nodes = MakeNodes(1, 1, 3);
  nodes[1].state = NodeState::kDraining;
  nodes[1].drain_deadline = now_ + absl::Minutes(5);
  nodes[2].drain_deadline = now_ + absl::Minutes(5);
  auto refused = scheduler_->UpsertNodes(nodes, now_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "nodes[2].drain_deadline: only a DRAINING node has one");
  EXPECT_EQ(scheduler_->fleet().slots().size(), 1u);
  nodes.pop_back();
  ASSERT_TRUE(scheduler_->UpsertNodes(nodes, now_).ok());
  EXPECT_EQ(NodeOf("H100-0001").drain_deadline, now_ + absl::Minutes(5));
}

TEST_F(RepairTest, DrainDeadlineSurvivesARestartAndAnUpsert) {
  Init(1, 2);
  GangPtr gang = Submit(Spec("q").Pods(1, 8));
  Cycle();
  const absl::Time deadline = now_ + absl::Minutes(10);
  ASSERT_TRUE(scheduler_
                  ->SetNodeState(NodeId("H100-0000"), NodeState::kDraining,
                                 "retire", now_, deadline)
                  .ok());
  // Upserting the node again keeps its state and deadline.
  ASSERT_TRUE(scheduler_->UpsertNodes(MakeNodes(1, 1, 2), now_).ok());
  EXPECT_EQ(NodeOf("H100-0000").drain_deadline, deadline);
  MemoryStore store;
  ASSERT_TRUE(store.Commit(scheduler_->TakeMutation()).ok());
  auto restored = Scheduler::Restore(*store.LoadAll(), now_);
  ASSERT_TRUE(restored.ok()) << restored.status();
  (*restored)->RunCycle(deadline);
  EXPECT_THAT((*restored)->FindGang(gang->id)->placement,
              ElementsAre(Pod(0, "H100-0001", kAll)));
}

TEST(PlanRepairTest, LeavesTheFleetAsItWasAndNamesThePodSet) {
  Fleet fleet({"block", "rack"});
  fleet.Upsert(MakeNodes(1, 2, 2));
  Gang gang;
  gang.id = GangId("g-1");
  gang.spec = Spec("q").Pods(2, 8, "workers").Required("rack");
  gang.placement = {{"workers", 0, NodeId("H100-0000"), kAll},
                    {"workers", 1, NodeId("H100-0001"), kAll}};
  ASSERT_TRUE(fleet.Allocate(gang, GangHandle{0}, gang.placement).ok());
  std::vector<uint64_t> before;
  for (const Fleet::Slot& slot : fleet.slots()) {
    before.push_back(slot.used_gpu_mask);
  }
  RepairOptions options;
  options.vacate.assign(fleet.slots().size(), 0);
  options.vacate[fleet.Find(NodeId("H100-0001"))] = 1;
  // The rack holds no free node: nothing moves.
  RepairResult result = PlanRepair(gang, fleet, options);
  EXPECT_FALSE(result.repaired);
  EXPECT_THAT(result.reason, StartsWith("pod set workers: NO_FIT"));
  EXPECT_EQ(result.placement, gang.placement);
  // With the other pod's node vacated too, the pair moves to the free rack.
  options.vacate[fleet.Find(NodeId("H100-0000"))] = 1;
  result = PlanRepair(gang, fleet, options);
  ASSERT_TRUE(result.repaired) << result.reason;
  EXPECT_EQ(result.moved_pods, 2);
  EXPECT_EQ(result.placement, (std::vector<PodPlacement>{
                                  {"workers", 0, NodeId("H100-0100"), kAll},
                                  {"workers", 1, NodeId("H100-0101"), kAll}}));
  std::vector<uint64_t> after;
  for (const Fleet::Slot& slot : fleet.slots()) {
    after.push_back(slot.used_gpu_mask);
  }
  EXPECT_EQ(after, before);
}

}  // namespace
}  // namespace phalanx::core
