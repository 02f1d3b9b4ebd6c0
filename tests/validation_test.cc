// Bad input gets the code of docs/design.md §8 and a message naming the field;
// nothing is stored and the daemon keeps serving.
#include <cstdint>
#include <limits>
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
      "spec: can never fit: the largest node has 8 GPUs; a pod needs 16");
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

// The hostile inputs of the security review: each is refused with the code
// and a message naming the field, and nothing changes (same revision, same
// config version, same queues).
class HostileInputTest : public ValidationTest {
 protected:
  int64_t Revision() {
    grpc::ClientContext context;
    v1::ListGangsResponse response;
    EXPECT_TRUE(scheduler_->ListGangs(&context, {}, &response).ok());
    return response.revision();
  }
  v1::Config Config() {
    grpc::ClientContext context;
    v1::Config config;
    EXPECT_TRUE(admin_->GetConfig(&context, {}, &config).ok());
    return config;
  }
  std::string Queues() {
    grpc::ClientContext context;
    v1::ListQueuesResponse response;
    EXPECT_TRUE(admin_->ListQueues(&context, {}, &response).ok());
    return response.SerializeAsString();
  }
  grpc::Status Submit(const v1::SubmitGangRequest& request) {
    grpc::ClientContext context;
    v1::SubmitGangResponse response;
    return scheduler_->SubmitGang(&context, request, &response);
  }
  grpc::Status Report(const v1::ReportGangRequest& request) {
    grpc::ClientContext context;
    v1::ReportGangResponse response;
    return scheduler_->ReportGang(&context, request, &response);
  }

  void SetUp() override {
    ValidationTest::SetUp();
    admin_ = daemon_->Admin();
    fleet_ = daemon_->Fleet();
  }

  std::unique_ptr<v1::Admin::Stub> admin_;
  std::unique_ptr<v1::Fleet::Stub> fleet_;
};

TEST_F(HostileInputTest, HugeQuotasAndUpperCaseNamesAreRefused) {
  const std::string queues = Queues();
  v1::PutQueueRequest request;
  request.mutable_queue()->set_name("greedy");
  request.mutable_queue()->set_weight(1);
  (*request.mutable_queue()->mutable_nominal_gpus())["H100"] =
      std::numeric_limits<int64_t>::max();
  grpc::ClientContext context;
  v1::Queue response;
  grpc::Status status = admin_->PutQueue(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "queue.nominal_gpus[\"H100\"]: must be in 0..1099511627776");
  (*request.mutable_queue()->mutable_nominal_gpus())["H100"] =
      (int64_t{1} << 40) + 1;
  grpc::ClientContext again;
  EXPECT_EQ(admin_->PutQueue(&again, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  request.mutable_queue()->set_name("ABC");
  request.mutable_queue()->clear_nominal_gpus();
  grpc::ClientContext upper;
  status = admin_->PutQueue(&upper, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "queue.name: \"ABC\" may hold only lower-case letters, digits, "
            "'.', '_' and '-'");
  EXPECT_EQ(Queues(), queues);
  EXPECT_EQ(Revision(), 0);
  // The most a quota may be is accepted.
  request.mutable_queue()->set_name("big");
  (*request.mutable_queue()->mutable_nominal_gpus())["H100"] = int64_t{1} << 40;
  grpc::ClientContext at_limit;
  EXPECT_TRUE(admin_->PutQueue(&at_limit, request, &response).ok());
}

TEST_F(HostileInputTest, LevelsStayWhileARackGangIsAdmitted) {
  const v1::Gang gang = SubmitOk(*scheduler_, SubmitRequest("a", 2, 8, "rack"));
  ASSERT_EQ(gang.state(), v1::GANG_STATE_ADMITTED);
  const v1::Config before = Config();
  const int64_t revision = Revision();
  v1::UpdateConfigRequest request;
  *request.mutable_config() = before;
  request.mutable_config()->clear_topology_levels();
  request.mutable_config()->add_topology_levels("rack");
  request.mutable_config()->add_topology_levels("block");
  grpc::ClientContext context;
  v1::Config response;
  grpc::Status status = admin_->UpdateConfig(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(),
            "config.topology_levels: gang " + gang.id() +
                " is ADMITTED under a topology constraint placed on the "
                "current levels; change them when no such gang holds GPUs");
  EXPECT_EQ(Config().SerializeAsString(), before.SerializeAsString());
  EXPECT_EQ(Revision(), revision);
}

TEST_F(HostileInputTest, BadDurationsTimestampsAndCheckpoints) {
  v1::SubmitGangRequest runtime = SubmitRequest("a", 1, 8);
  runtime.mutable_spec()->mutable_max_runtime()->set_seconds(1);
  runtime.mutable_spec()->mutable_max_runtime()->set_nanos(-999'999'999);
  grpc::Status status = Submit(runtime);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "spec.max_runtime.nanos: must have the sign of seconds (1 s, "
            "-999999999 ns)");
  EXPECT_EQ(StoredGangs(), 0);

  // Fill the fleet, so the next gang stays PENDING.
  const v1::Gang running = SubmitOk(*scheduler_, SubmitRequest("a", 8, 8));
  ASSERT_EQ(running.state(), v1::GANG_STATE_ADMITTED);
  const v1::Gang pending = SubmitOk(*scheduler_, SubmitRequest("a", 1, 8));
  ASSERT_EQ(pending.state(), v1::GANG_STATE_PENDING);
  const int64_t revision = Revision();
  v1::ReportGangRequest report;
  report.set_gang_id(pending.id());
  *report.mutable_last_checkpoint_time() = running.admit_time();
  status = Report(report);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "last_checkpoint_time: gang " + pending.id() +
                " is PENDING; only an ADMITTED, RUNNING or PREEMPTING gang "
                "checkpoints");
  report.set_gang_id(running.id());
  for (int64_t seconds : {int64_t{1} << 62, -(int64_t{1} << 62)}) {
    report.mutable_last_checkpoint_time()->set_seconds(seconds);
    status = Report(report);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(),
                ::testing::StartsWith("last_checkpoint_time.seconds: "));
  }
  *report.mutable_last_checkpoint_time() = running.admit_time();
  report.mutable_last_checkpoint_time()->set_nanos(-1);
  EXPECT_EQ(Report(report).error_message(),
            "last_checkpoint_time.nanos: must be in 0..999999999, not -1");
  // A day from now, or before the admission: in range, but not a checkpoint
  // of this run.
  *report.mutable_last_checkpoint_time() = running.admit_time();
  report.mutable_last_checkpoint_time()->set_seconds(
      running.admit_time().seconds() + 86400);
  EXPECT_THAT(Report(report).error_message(),
              ::testing::HasSubstr(" is in the future (now "));
  report.mutable_last_checkpoint_time()->set_seconds(
      running.admit_time().seconds() - 1);
  EXPECT_THAT(Report(report).error_message(),
              ::testing::HasSubstr(" is before the gang's admission at "));
  EXPECT_EQ(Revision(), revision);
  EXPECT_FALSE(GetOk(*scheduler_, running.id()).has_last_checkpoint_time());
  // The admission time itself is a checkpoint of this run.
  *report.mutable_last_checkpoint_time() = running.admit_time();
  EXPECT_TRUE(Report(report).ok());
}

TEST_F(HostileInputTest, HugeIdsLabelsAndReasonsAreRefusedWithShortErrors) {
  const std::string huge(1 << 20, 'g');
  grpc::ClientContext get_context;
  v1::GetGangRequest get;
  get.set_gang_id(huge);
  v1::GetGangResponse got;
  grpc::Status status = scheduler_->GetGang(&get_context, get, &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "gang_id: longer than 128 bytes (1048576)");
  get.set_gang_id(std::string(128, 'g'));
  grpc::ClientContext at_limit;
  status = scheduler_->GetGang(&at_limit, get, &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(),
            "gang_id: no gang \"" + std::string(64, 'g') + "\"... (128 bytes)");
  v1::CancelGangRequest cancel;
  cancel.set_gang_id("g 1");
  grpc::ClientContext cancel_context;
  v1::CancelGangResponse cancelled;
  EXPECT_EQ(scheduler_->CancelGang(&cancel_context, cancel, &cancelled)
                .error_message(),
            "gang_id: \"g 1\" may hold only printable ASCII without spaces");

  v1::SubmitGangRequest labelled = SubmitRequest("a", 1, 8);
  (*labelled.mutable_spec()->mutable_labels())["blob"] =
      std::string(3 << 20, 'x');
  status = Submit(labelled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "spec.labels[\"blob\"]: value longer than 256 bytes");
  labelled.mutable_spec()->clear_labels();
  (*labelled.mutable_spec()->mutable_labels())[std::string(3 << 20, 'k')] = "v";
  status = Submit(labelled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "spec.labels[\"" + std::string(64, 'k') +
                                        "\"... (3145728 bytes)]: key longer "
                                        "than 63 bytes");
  EXPECT_EQ(StoredGangs(), 0);

  v1::UpsertNodesRequest nodes;
  v1::Node* node = nodes.add_nodes();
  node->set_id("extra-1");
  node->set_gpu_model("H100");
  node->set_gpu_count(8);
  (*node->mutable_labels())["block"] = "b0";
  (*node->mutable_labels())["rack"] = "b0-r0";
  (*node->mutable_labels())["note"] = std::string(3 << 20, 'x');
  grpc::ClientContext upsert_context;
  v1::UpsertNodesResponse upserted;
  status = fleet_->UpsertNodes(&upsert_context, nodes, &upserted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "nodes[0].labels[\"note\"]: value longer than 256 bytes");

  v1::SetNodeStateRequest cordon;
  cordon.set_node_id("node-000");
  cordon.set_state(v1::NODE_STATE_CORDONED);
  cordon.set_reason(std::string(1025, 'r'));
  grpc::ClientContext cordon_context;
  v1::SetNodeStateResponse cordoned;
  status = fleet_->SetNodeState(&cordon_context, cordon, &cordoned);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "reason: longer than 1024 bytes (1025)");

  grpc::ClientContext list_context;
  v1::ListNodesResponse listed;
  ASSERT_TRUE(fleet_->ListNodes(&list_context, {}, &listed).ok());
  EXPECT_EQ(listed.nodes_size(), 8);
  for (const v1::Node& n : listed.nodes()) {
    EXPECT_EQ(n.state(), v1::NODE_STATE_READY) << n.id();
  }
  EXPECT_EQ(Revision(), 0);
}

TEST_F(HostileInputTest, PendingGangsPerQueueAreBounded) {
  v1::UpdateConfigRequest update;
  *update.mutable_config() = Config();
  update.mutable_config()->mutable_limits()->set_max_pending_gangs_per_queue(2);
  grpc::ClientContext update_context;
  v1::Config updated;
  ASSERT_TRUE(admin_->UpdateConfig(&update_context, update, &updated).ok());
  EXPECT_EQ(updated.limits().max_pending_gangs_per_queue(), 2);
  EXPECT_EQ(updated.limits().max_labels(), 32);  // the others keep defaults

  SubmitOk(*scheduler_, SubmitRequest("a", 8, 8));  // fills the fleet
  SubmitOk(*scheduler_, SubmitRequest("a", 1, 8));
  SubmitOk(*scheduler_, SubmitRequest("a", 1, 8));
  const int64_t revision = Revision();
  grpc::Status status = Submit(SubmitRequest("a", 1, 8));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(),
            "spec.queue: queue \"a\" has 2 pending gangs, the most "
            "limits.max_pending_gangs_per_queue allows");
  EXPECT_EQ(Revision(), revision);
  EXPECT_EQ(StoredGangs(), 3);
  EXPECT_TRUE(Submit(SubmitRequest("b", 1, 8)).ok());  // another queue

  update.mutable_config()->set_version(updated.version());
  update.mutable_config()->mutable_limits()->set_max_id_bytes(8);
  grpc::ClientContext bad_context;
  status = admin_->UpdateConfig(&bad_context, update, &updated);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "config.limits.max_id_bytes: must be in 32..4096");
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
