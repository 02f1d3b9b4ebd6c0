// Bad input gets the code of DESIGN §8 and a message naming the field;
// nothing is stored and the daemon keeps serving.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

struct BadSubmit {
  std::string name;
  v1::SubmitGangRequest request;
  grpc::StatusCode code;
  std::string message;
};

std::vector<BadSubmit> BadSubmits() {
  std::vector<BadSubmit> cases;
  auto add = [&](std::string name, v1::SubmitGangRequest request,
                 grpc::StatusCode code, std::string message) {
    cases.push_back(
        {std::move(name), std::move(request), code, std::move(message)});
  };
  add("zero count", SubmitRequest("a", 0, 8),
      grpc::StatusCode::INVALID_ARGUMENT,
      "spec.pod_sets[0].count: must be > 0");
  v1::SubmitGangRequest second_negative = SubmitRequest("a", 1, 8);
  *second_negative.mutable_spec()->add_pod_sets() =
      second_negative.spec().pod_sets(0);
  second_negative.mutable_spec()->mutable_pod_sets(1)->set_name("b");
  second_negative.mutable_spec()->mutable_pod_sets(1)->set_count(-3);
  add("negative count", second_negative, grpc::StatusCode::INVALID_ARGUMENT,
      "spec.pod_sets[1].count: must be > 0");
  add("unknown queue", SubmitRequest("llm", 1, 8), grpc::StatusCode::NOT_FOUND,
      "spec.queue: no queue \"llm\"");
  add("empty queue", SubmitRequest("", 1, 8),
      grpc::StatusCode::INVALID_ARGUMENT, "spec.queue: must not be empty");
  add("unknown level", SubmitRequest("a", 1, 8, "zone"),
      grpc::StatusCode::INVALID_ARGUMENT,
      "spec.pod_sets[0].topology.level: unknown level \"zone\" (levels: block, "
      "rack, node)");
  add("more gpus than any node", SubmitRequest("a", 1, 16),
      grpc::StatusCode::FAILED_PRECONDITION,
      "spec: can never fit: the fleet holds 0 of 1 pods of 16 GPUs");
  add("never fits a rack", SubmitRequest("a", 3, 8, "rack"),
      grpc::StatusCode::FAILED_PRECONDITION,
      "spec: can never fit: the largest rack holds 2 of 3 pods of 8 GPUs");
  v1::SubmitGangRequest bad_mode = SubmitRequest("a", 1, 8);
  bad_mode.mutable_spec()->mutable_pod_sets(0)->mutable_topology()->set_mode(
      static_cast<v1::TopologyMode>(42));
  add("unknown enum", bad_mode, grpc::StatusCode::INVALID_ARGUMENT,
      "spec.pod_sets[0].topology.mode: unknown value 42");
  v1::SubmitGangRequest wide_slice = SubmitRequest("a", 2, 8, "rack");
  wide_slice.mutable_spec()->mutable_pod_sets(0)->mutable_slice()->set_size(2);
  wide_slice.mutable_spec()->mutable_pod_sets(0)->mutable_slice()->set_level(
      "block");
  add("slice wider than the constraint", wide_slice,
      grpc::StatusCode::INVALID_ARGUMENT,
      "spec.pod_sets[0].slice.level: \"block\" is wider than topology.level "
      "\"rack\"");
  v1::SubmitGangRequest uneven_slice = wide_slice;
  uneven_slice.mutable_spec()->mutable_pod_sets(0)->mutable_slice()->set_size(
      3);
  add("slice that does not divide the count", uneven_slice,
      grpc::StatusCode::INVALID_ARGUMENT,
      "spec.pod_sets[0].slice.size: must divide count (2)");
  v1::SubmitGangRequest no_sets = SubmitRequest("a", 1, 8);
  no_sets.mutable_spec()->clear_pod_sets();
  add("no pod sets", no_sets, grpc::StatusCode::INVALID_ARGUMENT,
      "spec.pod_sets: must not be empty");
  return cases;
}

class ValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = StartDemoDaemon();
    ASSERT_TRUE(daemon_->Start()) << daemon_->output();
    scheduler_ = daemon_->Scheduler();
  }

  int StoredGangs() {
    grpc::ClientContext context;
    v1::ListGangsResponse response;
    EXPECT_TRUE(scheduler_->ListGangs(&context, {}, &response).ok());
    return response.gangs_size();
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
};

TEST_F(ValidationTest, BadSubmitsGetTheRightCodeAndStoreNothing) {
  for (const BadSubmit& c : BadSubmits()) {
    grpc::ClientContext context;
    v1::SubmitGangResponse response;
    grpc::Status status =
        scheduler_->SubmitGang(&context, c.request, &response);
    EXPECT_EQ(status.error_code(), c.code)
        << c.name << ": " << status.error_message();
    EXPECT_EQ(status.error_message(), c.message) << c.name;
  }
  EXPECT_EQ(StoredGangs(), 0);
  grpc::ClientContext context;
  v1::SubmitGangResponse response;
  EXPECT_TRUE(
      scheduler_->SubmitGang(&context, SubmitRequest("a", 1, 8), &response)
          .ok());
  EXPECT_EQ(StoredGangs(), 1);
}

TEST_F(ValidationTest, EmptyAndUnknownIds) {
  grpc::ClientContext empty_context;
  v1::GetGangResponse response;
  grpc::Status empty = scheduler_->GetGang(&empty_context, {}, &response);
  EXPECT_EQ(empty.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(empty.error_message(), "gang_id: must not be empty");
  grpc::ClientContext unknown_context;
  v1::GetGangRequest request;
  request.set_gang_id("g-404");
  EXPECT_EQ(
      scheduler_->GetGang(&unknown_context, request, &response).error_code(),
      grpc::StatusCode::NOT_FOUND);
  auto fleet = daemon_->Fleet();
  grpc::ClientContext node_context;
  v1::SetNodeStateRequest node_request;
  node_request.set_node_id("node-000");
  v1::SetNodeStateResponse node_response;
  grpc::Status unspecified =
      fleet->SetNodeState(&node_context, node_request, &node_response);
  EXPECT_EQ(unspecified.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(unspecified.error_message(), "state: unknown value 0");
}

TEST_F(ValidationTest, OversizedMessageIsRefusedBeforeAnyHandler) {
  v1::SubmitGangRequest request = SubmitRequest("a", 1, 8);
  (*request.mutable_spec()->mutable_labels())["blob"] =
      std::string(5 << 20, 'x');
  grpc::ClientContext context;
  v1::SubmitGangResponse response;
  EXPECT_EQ(scheduler_->SubmitGang(&context, request, &response).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(StoredGangs(), 0);
}

TEST_F(ValidationTest, BadNodesAreRejectedAllOrNothing) {
  auto fleet = daemon_->Fleet();
  v1::UpsertNodesRequest request;
  v1::Node* good = request.add_nodes();
  good->set_id("extra-1");
  good->set_gpu_model("H100");
  good->set_gpu_count(8);
  (*good->mutable_labels())["block"] = "b0";
  (*good->mutable_labels())["rack"] = "b0-r0";
  v1::Node* bad = request.add_nodes();
  *bad = *good;
  bad->set_id("extra-2");
  bad->mutable_labels()->erase("rack");
  grpc::ClientContext context;
  v1::UpsertNodesResponse response;
  grpc::Status status = fleet->UpsertNodes(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "nodes[1].labels: missing topology level \"rack\"");
  grpc::ClientContext list_context;
  v1::ListNodesResponse nodes;
  ASSERT_TRUE(fleet->ListNodes(&list_context, {}, &nodes).ok());
  EXPECT_EQ(nodes.nodes_size(), 8);
}

TEST(IdempotencyTest, RepeatedRequestIdReturnsTheFirstGang) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  auto scheduler = daemon->Scheduler();
  v1::SubmitGangResponse first, again;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(scheduler
                    ->SubmitGang(&context,
                                 SubmitRequest("a", 1, 8, "", "job-1"), &first)
                    .ok());
    EXPECT_TRUE(first.created());
  }
  {
    grpc::ClientContext context;
    ASSERT_TRUE(scheduler
                    ->SubmitGang(&context,
                                 SubmitRequest("a", 1, 8, "", "job-1"), &again)
                    .ok());
    EXPECT_FALSE(again.created());
    EXPECT_EQ(again.gang().id(), first.gang().id());
  }
  grpc::ClientContext context;
  v1::SubmitGangResponse other;
  grpc::Status status = scheduler->SubmitGang(
      &context, SubmitRequest("a", 2, 8, "", "job-1"), &other);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr(first.gang().id()));
}

}  // namespace
}  // namespace phalanx::testing
