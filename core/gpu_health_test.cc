// Node agents' health reports (Scheduler::ReportNodeHealth): unhealthy GPUs
// are never placed on, pods on a GPU that turns unhealthy are repaired or
// evicted, and an agent returns to READY only a node it made UNHEALTHY.
#include <string>
#include <vector>

#include "core/fleet_report.h"
#include "core/scheduler.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::MakeNodes;
using testing::Spec;

PodPlacement Pod(int index, const std::string& node, std::vector<int> gpus) {
  return PodPlacement{"set-0", index, NodeId(node), std::move(gpus)};
}

// One block of `racks` racks of `nodes` nodes of 8 H100 GPUs
// ("H100-0<r><nn>"), levels block/rack, and queue "q".
class GpuHealthTest : public testing::SchedulerFixture {
 protected:
  void Init(int racks, int nodes, Config config = {}) {
    config.topology_levels = {"block", "rack"};
    SchedulerFixture::Init(config, MakeNodes(1, racks, nodes),
                           {testing::MakeQueue("q")});
  }
  absl::StatusOr<Node> Report(const std::string& node, bool healthy,
                              std::vector<int> bad_gpus = {}) {
    return scheduler_->ReportNodeHealth(
        {NodeId(node), healthy, std::move(bad_gpus), "check"}, now_);
  }
  const Node& NodeOf(const std::string& id) {
    return scheduler_->fleet()
        .slots()[scheduler_->fleet().Find(NodeId(id))]
        .node;
  }
  std::vector<Event> TakeEvents() { return scheduler_->TakeMutation().events; }
};

TEST_F(GpuHealthTest, PlacementSkipsUnhealthyGpusUntilTheyReturn) {
  Init(1, 1);
  ASSERT_TRUE(Report("H100-0000", true, {3}).ok());
  EXPECT_EQ(NodeOf("H100-0000").unhealthy_gpu_mask, uint64_t{1} << 3);
  EXPECT_EQ(NodeOf("H100-0000").state, NodeState::kReady);
  GangPtr seven = Submit(Spec("q").Pods(1, 7));
  GangPtr one = Submit(Spec("q").Pods(1, 1));
  Cycle();
  EXPECT_THAT(Get(seven)->placement,
              ElementsAre(Pod(0, "H100-0000", {0, 1, 2, 4, 5, 6, 7})));
  EXPECT_EQ(StateOf(one), GangState::kPending);
  ASSERT_TRUE(Report("H100-0000", true, {}).ok());
  Cycle();
  EXPECT_THAT(Get(one)->placement, ElementsAre(Pod(0, "H100-0000", {3})));
}

TEST_F(GpuHealthTest, APodOnANewlyUnhealthyGpuIsRepairedAlone) {
  Init(1, 2);
  GangPtr gang = Submit(Spec("q").Pods(2, 4).Required("rack"));
  Cycle();
  ASSERT_THAT(Get(gang)->placement,
              ElementsAre(Pod(0, "H100-0000", {0, 1, 2, 3}),
                          Pod(1, "H100-0000", {4, 5, 6, 7})));
  TakeEvents();
  ASSERT_TRUE(Report("H100-0000", true, {2}).ok());
  const std::vector<Event> events = TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kRepaired);
  // Only the pod on GPU 2 moved, inside the rack; the node keeps its pod.
  EXPECT_THAT(Get(gang)->placement,
              ElementsAre(Pod(0, "H100-0001", {0, 1, 2, 3}),
                          Pod(1, "H100-0000", {4, 5, 6, 7})));
  EXPECT_EQ(NodeOf("H100-0000").state, NodeState::kReady);
  EXPECT_EQ(scheduler_->vacate_counts().at({"repaired", "unhealthy_gpu"}), 1);
}

TEST_F(GpuHealthTest, AGangThatCannotMoveIsEvictedAndWaits) {
  Init(1, 1);
  GangPtr gang = Submit(Spec("q").Pods(1, 8));
  Cycle();
  TakeEvents();
  ASSERT_TRUE(Report("H100-0000", true, {5}).ok());
  const std::vector<Event> events = TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kEvicted);
  EXPECT_THAT(Get(gang)->reason,
              HasSubstr("EVICTED: node H100-0000 has an unhealthy GPU; not "
                        "repaired: "));
  Cycle();
  EXPECT_EQ(StateOf(gang), GangState::kPending);
  // The GPU returns: the gang fits again.
  ASSERT_TRUE(Report("H100-0000", true, {}).ok());
  Cycle();
  EXPECT_EQ(StateOf(gang), GangState::kAdmitted);
}

TEST_F(GpuHealthTest, ARepeatedReportChangesNothing) {
  Init(1, 1);
  ASSERT_TRUE(Report("H100-0000", false, {1}).ok());
  scheduler_->TakeMutation();
  ASSERT_TRUE(Report("H100-0000", false, {1}).ok());
  EXPECT_TRUE(scheduler_->TakeMutation().empty());
}

TEST_F(GpuHealthTest, TheAgentUndoesOnlyItsOwnUnhealthy) {
  Init(1, 4);
  // Its own: UNHEALTHY on a failed check, READY on a passing one.
  ASSERT_EQ(Report("H100-0000", false)->state, NodeState::kUnhealthy);
  EXPECT_EQ(NodeOf("H100-0000").state_source, NodeStateSource::kNodeAgent);
  EXPECT_EQ(Report("H100-0000", true)->state, NodeState::kReady);
  // An operator's UNHEALTHY, a cordon and a drain stay as they are, and a
  // failed check does not turn them into its own UNHEALTHY.
  const std::vector<std::pair<std::string, NodeState>> operators = {
      {"H100-0001", NodeState::kUnhealthy},
      {"H100-0002", NodeState::kCordoned},
      {"H100-0003", NodeState::kDraining}};
  for (const auto& [node, state] : operators) {
    ASSERT_TRUE(
        scheduler_->SetNodeState(NodeId(node), state, "ops", now_).ok());
    EXPECT_EQ(Report(node, false)->state, state) << node;
    EXPECT_EQ(Report(node, true)->state, state) << node;
    EXPECT_EQ(NodeOf(node).state_source, NodeStateSource::kOperator) << node;
  }
}

TEST_F(GpuHealthTest, AHeartbeatEndsAHeartbeatTimeoutOnly) {
  Config config;
  config.heartbeat_timeout = absl::Minutes(1);
  config.startup_grace = absl::ZeroDuration();
  Init(1, 2, config);
  ASSERT_TRUE(scheduler_
                  ->SetNodeState(NodeId("H100-0001"), NodeState::kUnhealthy,
                                 "ops", now_)
                  .ok());
  Cycle(absl::Minutes(2));
  ASSERT_EQ(NodeOf("H100-0000").state, NodeState::kUnhealthy);
  EXPECT_EQ(NodeOf("H100-0000").state_source,
            NodeStateSource::kHeartbeatTimeout);
  // A passing health check is not the agent's to undo it; a heartbeat is.
  EXPECT_EQ(Report("H100-0000", true)->state, NodeState::kUnhealthy);
  ASSERT_TRUE(
      scheduler_->Heartbeat({NodeId("H100-0000"), NodeId("H100-0001")}, now_)
          .ok());
  EXPECT_EQ(NodeOf("H100-0000").state, NodeState::kReady);
  EXPECT_EQ(NodeOf("H100-0001").state, NodeState::kUnhealthy);
}

TEST_F(GpuHealthTest, BadReportsNameTheField) {
  Init(1, 1);
  EXPECT_EQ(Report("nope", true).status().code(), absl::StatusCode::kNotFound);
  absl::Status range = Report("H100-0000", true, {1, 8}).status();
  EXPECT_EQ(range.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(range.message(),
            "unhealthy_gpus[1]: GPU 8 does not exist; the node has 8");
  absl::Status twice = Report("H100-0000", true, {1, 1}).status();
  EXPECT_EQ(twice.message(), "unhealthy_gpus[1]: GPU 1 is named twice");
  EXPECT_EQ(NodeOf("H100-0000").unhealthy_gpu_mask, 0u);
}

TEST_F(GpuHealthTest, UpsertKeepsWhatTheAgentReported) {
  Init(1, 1);
  ASSERT_TRUE(Report("H100-0000", false, {2, 6}).ok());
  std::vector<Node> smaller = MakeNodes(1, 1, 1, /*gpus=*/4);
  ASSERT_TRUE(scheduler_->UpsertNodes(smaller, now_).ok());
  const Node& node = NodeOf("H100-0000");
  EXPECT_EQ(node.state, NodeState::kUnhealthy);
  EXPECT_EQ(node.state_source, NodeStateSource::kNodeAgent);
  EXPECT_EQ(node.unhealthy_gpu_mask, uint64_t{1} << 2);  // GPU 6 is gone
}

TEST_F(GpuHealthTest, UnhealthyGpusCountAsUnhealthyInTheReport) {
  Init(1, 1);
  GangPtr gang = Submit(Spec("q").Pods(1, 2));
  Cycle();
  ASSERT_TRUE(Report("H100-0000", true, {7}).ok());
  const GpuCounts counts =
      DescribeFleet(scheduler_->fleet()).gpus_by_model.at("H100");
  EXPECT_EQ(counts.allocated, 2);
  EXPECT_EQ(counts.unhealthy, 1);
  EXPECT_EQ(counts.free, 5);
}

}  // namespace
}  // namespace phalanx::core
