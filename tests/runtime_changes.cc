#include "tests/runtime_changes.h"

#include <chrono>
#include <memory>

#include "gtest/gtest.h"
#include "phalanx/v1/admin.pb.h"
#include "phalanx/v1/fleet.pb.h"

namespace phalanx::testing {
namespace {

constexpr char kQueue[] = "a";
constexpr char kNode[] = "node-000";

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(30));
  return context;
}

}  // namespace

std::ostream& operator<<(std::ostream& out, const OperatorFields& fields) {
  return out << "{queue a: weight " << fields.queue_a_weight << ", held "
             << fields.queue_a_held << "; cycle interval "
             << fields.cycle_interval_ms << " ms; " << kNode << ": "
             << v1::NodeState_Name(fields.node_000_state) << "}";
}

OperatorFields FileFields() { return {1, false, 200, v1::NODE_STATE_READY}; }

OperatorFields ChangedFields() {
  return {7, true, 300, v1::NODE_STATE_CORDONED};
}

void ChangeAtRunTime(const DaemonProcess& daemon) {
  auto admin = daemon.Admin();
  v1::PutQueueRequest put;
  put.mutable_queue()->set_name(kQueue);
  put.mutable_queue()->set_weight(7);
  put.mutable_queue()->set_held(true);
  put.mutable_update_mask()->add_paths("weight");
  put.mutable_update_mask()->add_paths("held");
  v1::Queue queue;
  grpc::Status status = admin->PutQueue(Context().get(), put, &queue);
  EXPECT_TRUE(status.ok()) << "PutQueue: " << status.error_message();

  v1::UpdateConfigRequest update;
  update.mutable_config()->mutable_cycle_interval()->set_nanos(300'000'000);
  update.mutable_update_mask()->add_paths("cycle_interval");
  v1::Config config;
  status = admin->UpdateConfig(Context().get(), update, &config);
  EXPECT_TRUE(status.ok()) << "UpdateConfig: " << status.error_message();

  v1::SetNodeStateRequest cordon;
  cordon.set_node_id(kNode);
  cordon.set_state(v1::NODE_STATE_CORDONED);
  cordon.set_reason("incident");
  v1::SetNodeStateResponse node;
  status = daemon.Fleet()->SetNodeState(Context().get(), cordon, &node);
  EXPECT_TRUE(status.ok()) << "SetNodeState: " << status.error_message();
}

OperatorFields ReadOperatorFields(const DaemonProcess& daemon) {
  OperatorFields fields;
  auto admin = daemon.Admin();
  v1::ListQueuesResponse queues;
  grpc::Status status = admin->ListQueues(Context().get(), {}, &queues);
  EXPECT_TRUE(status.ok()) << "ListQueues: " << status.error_message();
  for (const v1::Queue& queue : queues.queues()) {
    if (queue.name() != kQueue) continue;
    fields.queue_a_weight = queue.has_weight() ? queue.weight() : 1;
    fields.queue_a_held = queue.held();
  }
  v1::Config config;
  status = admin->GetConfig(Context().get(), {}, &config);
  EXPECT_TRUE(status.ok()) << "GetConfig: " << status.error_message();
  fields.cycle_interval_ms = config.cycle_interval().seconds() * 1000 +
                             config.cycle_interval().nanos() / 1'000'000;
  v1::ListNodesResponse nodes;
  status = daemon.Fleet()->ListNodes(Context().get(), {}, &nodes);
  EXPECT_TRUE(status.ok()) << "ListNodes: " << status.error_message();
  for (const v1::Node& node : nodes.nodes()) {
    if (node.id() == kNode) fields.node_000_state = node.state();
  }
  return fields;
}

}  // namespace phalanx::testing
