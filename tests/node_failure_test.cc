// Node failure and drain deadlines against a real phalanxd: repair in place
// seen on Watch, drain deadlines that fire, persist and are validated.
#include <chrono>
#include <ctime>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

using ::testing::HasSubstr;

class NodeFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = StartDemoDaemon();
    ASSERT_TRUE(daemon_->Start()) << daemon_->output();
    scheduler_ = daemon_->Scheduler();
    fleet_ = daemon_->Fleet();
  }

  grpc::Status SetNodeState(const v1::SetNodeStateRequest& request,
                            v1::SetNodeStateResponse* response) {
    grpc::ClientContext context;
    return fleet_->SetNodeState(&context, request, response);
  }

  grpc::Status MarkUnhealthy(const std::string& node) {
    v1::SetNodeStateRequest request;
    request.set_node_id(node);
    request.set_state(v1::NODE_STATE_UNHEALTHY);
    request.set_reason("xid 79");
    v1::SetNodeStateResponse response;
    return SetNodeState(request, &response);
  }

  // The first event of `type` after revision `after` (others skipped),
  // waiting at most 20 s; an empty event when none came.
  v1::GangEvent WaitFor(v1::EventType type, int64_t after) {
    return WaitForEvent(*scheduler_, type, after, std::chrono::seconds(20));
  }

  v1::Node GetNode(const std::string& id) {
    grpc::ClientContext context;
    v1::ListNodesResponse response;
    EXPECT_TRUE(fleet_->ListNodes(&context, {}, &response).ok());
    for (const v1::Node& node : response.nodes()) {
      if (node.id() == id) return node;
    }
    ADD_FAILURE() << "no node " << id;
    return v1::Node();
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
  std::unique_ptr<v1::Fleet::Stub> fleet_;
};

TEST_F(NodeFailureTest,
       UnhealthyNodeRepairsTheGangAndWatchSeesTheNewPlacement) {
  // Block b0 holds node-000, node-001 (rack b0-r0), node-010, node-011.
  v1::Gang gang = SubmitOk(*scheduler_, SubmitRequest("a", 2, 8, "block"));
  ASSERT_EQ(gang.state(), v1::GANG_STATE_ADMITTED);
  ASSERT_EQ(gang.placement(0).node(), "node-000");
  ASSERT_EQ(gang.placement(1).node(), "node-001");

  ASSERT_TRUE(MarkUnhealthy("node-000").ok());

  const v1::GangEvent event = WaitFor(v1::EVENT_TYPE_REPAIRED, 0);
  ASSERT_EQ(event.type(), v1::EVENT_TYPE_REPAIRED);
  const v1::Gang& repaired = event.gang();
  EXPECT_EQ(repaired.id(), gang.id());
  EXPECT_EQ(repaired.state(), v1::GANG_STATE_ADMITTED);
  EXPECT_EQ(repaired.attempts(), 1);
  ASSERT_EQ(repaired.placement_size(), 2);
  // Only the failed node's pod moved, and it stayed in block b0.
  EXPECT_EQ(repaired.placement(0).node(), "node-010");
  EXPECT_EQ(repaired.placement(0).gpu_indices_size(), 8);
  EXPECT_EQ(repaired.placement(1).node(), "node-001");
  const v1::Gang stored = GetOk(*scheduler_, gang.id());
  EXPECT_EQ(stored.placement(0).node(), "node-010");
  EXPECT_EQ(stored.revision(), event.revision());

  const std::string counter =
      R"(phalanx_node_failure_gangs_total{cause="unhealthy",outcome="repaired"} 1)";
  std::string metrics;
  for (int i = 0; i < 50; ++i) {  // metrics follow the batch
    metrics = HttpGet(daemon_->metrics_port(), "/metrics");
    if (metrics.find(counter) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_THAT(metrics, HasSubstr(counter));
}

TEST_F(NodeFailureTest, GangThatCannotBeRepairedIsEvictedAndRequeued) {
  // Each gang fills a block: no READY node is left in b0 to repair into.
  v1::Gang gang = SubmitOk(*scheduler_, SubmitRequest("a", 4, 8, "block"));
  v1::Gang other = SubmitOk(*scheduler_, SubmitRequest("b", 4, 8, "block"));
  ASSERT_EQ(gang.state(), v1::GANG_STATE_ADMITTED);
  ASSERT_EQ(other.state(), v1::GANG_STATE_ADMITTED);
  ASSERT_EQ(gang.placement(0).node(), "node-000");

  ASSERT_TRUE(MarkUnhealthy("node-000").ok());

  const v1::GangEvent event = WaitFor(v1::EVENT_TYPE_EVICTED, 0);
  ASSERT_EQ(event.type(), v1::EVENT_TYPE_EVICTED);
  EXPECT_EQ(event.gang().id(), gang.id());
  EXPECT_EQ(event.gang().state(), v1::GANG_STATE_PENDING);
  EXPECT_EQ(event.gang().placement_size(), 0);
  EXPECT_THAT(event.gang().reason(),
              HasSubstr("EVICTED: node node-000 is unhealthy"));
  // Requeued whole: once the other block frees, it starts there.
  grpc::ClientContext context;
  v1::CancelGangRequest cancel;
  cancel.set_gang_id(other.id());
  v1::CancelGangResponse cancelled;
  ASSERT_TRUE(scheduler_->CancelGang(&context, cancel, &cancelled).ok());
  const v1::GangEvent admitted =
      WaitFor(v1::EVENT_TYPE_ADMITTED, event.revision());
  ASSERT_EQ(admitted.type(), v1::EVENT_TYPE_ADMITTED);
  EXPECT_EQ(admitted.gang().id(), gang.id());
  EXPECT_EQ(admitted.gang().placement(0).node(), "node-100");
}

TEST_F(NodeFailureTest, DrainDeadlineMovesTheGangWhenItPassesAndPersists) {
  v1::Gang gang = SubmitOk(*scheduler_, SubmitRequest("a", 1, 8));
  ASSERT_EQ(gang.placement(0).node(), "node-000");
  const int64_t deadline = std::time(nullptr) + 3;

  v1::SetNodeStateRequest request;
  request.set_node_id("node-000");
  request.set_state(v1::NODE_STATE_DRAINING);
  request.set_reason("retire");
  request.mutable_drain_deadline()->set_seconds(deadline);
  v1::SetNodeStateResponse response;
  ASSERT_TRUE(SetNodeState(request, &response).ok());
  EXPECT_EQ(response.node().state(), v1::NODE_STATE_DRAINING);
  EXPECT_EQ(response.node().drain_deadline().seconds(), deadline);
  // Before the deadline the gang stays where it is.
  EXPECT_EQ(GetOk(*scheduler_, gang.id()).placement(0).node(), "node-000");

  const v1::GangEvent event = WaitFor(v1::EVENT_TYPE_REPAIRED, 0);
  ASSERT_EQ(event.type(), v1::EVENT_TYPE_REPAIRED);
  EXPECT_GE(event.time().seconds(), deadline);
  EXPECT_EQ(event.gang().placement(0).node(), "node-001");
  EXPECT_EQ(event.gang().state(), v1::GANG_STATE_ADMITTED);

  // The node stays DRAINING with its deadline, across a restart too.
  ASSERT_EQ(daemon_->Terminate(), 0) << daemon_->output();
  ASSERT_TRUE(daemon_->Start()) << daemon_->output();
  scheduler_ = daemon_->Scheduler();
  fleet_ = daemon_->Fleet();
  const v1::Node node = GetNode("node-000");
  EXPECT_EQ(node.state(), v1::NODE_STATE_DRAINING);
  EXPECT_EQ(node.drain_deadline().seconds(), deadline);
  EXPECT_EQ(node.gang_ids_size(), 0);
}

TEST_F(NodeFailureTest, OnlyDrainTakesADeadline) {
  v1::SetNodeStateRequest request;
  request.set_node_id("node-000");
  request.set_state(v1::NODE_STATE_CORDONED);
  request.mutable_drain_deadline()->set_seconds(std::time(nullptr) + 60);
  v1::SetNodeStateResponse response;
  const grpc::Status status = SetNodeState(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "drain_deadline: only a DRAINING node takes one, not CORDONED");
  EXPECT_EQ(GetNode("node-000").state(), v1::NODE_STATE_READY);
}

}  // namespace
}  // namespace phalanx::testing
