// What launchers and operators rely on beyond the basic lifecycle, against
// a real phalanxd: gang leases (expiry, renewal, restarts), CHECKPOINTED
// events, PREEMPTING grace deadlines, FieldMask updates, ListGangs paging,
// UpsertNodes and node addresses, and the daemon's start and stop
// (--print-address-file, --version, SIGTERM).
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

using ::google::protobuf::util::TimeUtil;
using ::testing::HasSubstr;

// The demo config with a start-up grace of `grace` (leases and heartbeats)
// and, when `preemption`, preemption with a 60 s grace period.
std::string ConfigJson(const std::string& grace, bool preemption = false) {
  return absl::StrCat(
      R"({"topologyLevels":["block","rack"],"cycleInterval":"0.2s",)",
      R"("watch":{"bookmarkInterval":"0.5s"},"node":{"startupGrace":")", grace,
      R"("})",
      preemption ? R"(,"preemption":{"enabled":true,"gracePeriod":"60s",)"
                   R"("minRuntime":"0s"})"
                 : "",
      "}");
}

class LauncherApiTest : public ::testing::Test {
 protected:
  void StartWith(const std::string& config_json,
                 std::vector<std::string> extra = {}) {
    daemon_ = std::make_unique<DaemonProcess>();
    daemon_->AddArgs(
        {"--config=" + daemon_->WriteFile("config.json", config_json),
         "--fleet=" + daemon_->WriteFile("fleet.json", DemoFleetJson()),
         "--queues=" + daemon_->WriteFile("queues.json", DemoQueuesJson())});
    daemon_->AddArgs(extra);
    ASSERT_TRUE(daemon_->Start()) << daemon_->output();
    Connect();
  }
  void Connect() {
    scheduler_ = daemon_->Scheduler();
    admin_ = daemon_->Admin();
    fleet_ = daemon_->Fleet();
  }

  // A gang of all 64 GPUs with the given lease (seconds; 0 = none).
  v1::Gang SubmitLeased(int lease_seconds, int pods = 8) {
    v1::SubmitGangRequest request = SubmitRequest("a", pods, 8);
    if (lease_seconds > 0) {
      request.mutable_spec()->mutable_lease_duration()->set_seconds(
          lease_seconds);
    }
    return SubmitOk(*scheduler_, request);
  }

  grpc::Status Renew(const std::string& id, v1::RenewGangLeaseResponse* out) {
    grpc::ClientContext context;
    v1::RenewGangLeaseRequest request;
    request.set_gang_id(id);
    return scheduler_->RenewGangLease(&context, request, out);
  }

  // The first event of `type` after `after` (bounded: 30 s of stream).
  v1::GangEvent WaitFor(v1::EventType type, int64_t after) {
    v1::GangEvent event = WaitForEvent(*scheduler_, type, after);
    if (event.type() != type) {
      ADD_FAILURE() << "no event of type " << v1::EventType_Name(type);
    }
    return event;
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  std::unique_ptr<v1::Fleet::Stub> fleet_;
};

// --- Leases. ---

TEST_F(LauncherApiTest, ALapsedLeaseFailsTheGangAndFreesItsGpus) {
  StartWith(ConfigJson("0s"));
  v1::Gang gang = SubmitLeased(1);
  ASSERT_EQ(gang.state(), v1::GANG_STATE_ADMITTED) << gang.reason();
  ASSERT_TRUE(gang.has_lease_expire_time());
  EXPECT_EQ(TimeUtil::TimestampToSeconds(gang.lease_expire_time()) -
                TimeUtil::TimestampToSeconds(gang.admit_time()),
            1);
  // Nothing else fits while it holds every GPU.
  v1::Gang waiting = SubmitLeased(0, 1);
  EXPECT_EQ(waiting.state(), v1::GANG_STATE_PENDING);
  const v1::GangEvent failed =
      WaitFor(v1::EVENT_TYPE_FAILED, gang.revision() - 1);
  EXPECT_EQ(failed.gang().id(), gang.id());
  EXPECT_EQ(failed.gang().reason(), "LEASE_EXPIRED");
  EXPECT_TRUE(failed.gang().placement_released());
  EXPECT_FALSE(failed.gang().has_lease_expire_time());
  // Its GPUs went to the waiting gang.
  const v1::GangEvent admitted =
      WaitFor(v1::EVENT_TYPE_ADMITTED, failed.revision());
  EXPECT_EQ(admitted.gang().id(), waiting.id());
  // A lapsed lease cannot be renewed.
  v1::RenewGangLeaseResponse response;
  EXPECT_EQ(Renew(gang.id(), &response).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(LauncherApiTest, RenewalKeepsTheGangAliveWithoutRevisionsOrEvents) {
  StartWith(ConfigJson("0s"));
  v1::Gang gang = SubmitLeased(3);
  ASSERT_EQ(gang.state(), v1::GANG_STATE_ADMITTED) << gang.reason();
  int64_t last_expiry = 0;
  // 15 renewals 0.3 s apart: 4.5 s, well past the 3 s lease.
  for (int i = 0; i < 15; ++i) {
    v1::RenewGangLeaseResponse response;
    ASSERT_TRUE(Renew(gang.id(), &response).ok());
    const int64_t expiry =
        TimeUtil::TimestampToNanoseconds(response.lease_expire_time());
    EXPECT_GT(expiry, last_expiry);
    last_expiry = expiry;
    EXPECT_EQ(response.revision(), gang.revision());  // no revision bump
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  v1::Gang alive = GetOk(*scheduler_, gang.id());
  EXPECT_EQ(alive.state(), v1::GANG_STATE_ADMITTED);
  EXPECT_EQ(alive.revision(), gang.revision());
  EXPECT_EQ(TimeUtil::TimestampToNanoseconds(alive.lease_expire_time()),
            last_expiry);
  // Errors: no lease, unknown gang, not admitted yet.
  v1::RenewGangLeaseResponse response;
  v1::Gang unleased = SubmitLeased(0, 1);  // pending: no GPUs left
  grpc::Status status = Renew(unleased.id(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("no lease"));
  EXPECT_EQ(Renew("g-999999", &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::Gang pending = SubmitLeased(5, 1);
  status = Renew(pending.id(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("admitted"));
}

TEST_F(LauncherApiTest, ALeaseSurvivesARestartThenLapsesAfterTheGrace) {
  // The grace must cover the restart and the first read below; the lease
  // passes while the daemon is down.
  StartWith(ConfigJson("5s"));
  v1::Gang gang = SubmitLeased(1);
  ASSERT_EQ(gang.state(), v1::GANG_STATE_ADMITTED) << gang.reason();
  ASSERT_EQ(daemon_->Terminate(), 0) << daemon_->output();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_TRUE(daemon_->Start()) << daemon_->output();
  Connect();
  v1::Gang restored = GetOk(*scheduler_, gang.id());
  EXPECT_EQ(restored.state(), v1::GANG_STATE_ADMITTED) << restored.reason();
  // Not renewed: it lapses once the grace is over.
  const v1::GangEvent failed =
      WaitFor(v1::EVENT_TYPE_FAILED, restored.revision());
  EXPECT_EQ(failed.gang().id(), gang.id());
  EXPECT_EQ(failed.gang().reason(), "LEASE_EXPIRED");
}

TEST_F(LauncherApiTest, ARenewalAfterARestartKeepsTheGang) {
  StartWith(ConfigJson("60s"));
  v1::Gang gang = SubmitLeased(1);
  ASSERT_EQ(daemon_->Terminate(), 0) << daemon_->output();
  ASSERT_TRUE(daemon_->Start()) << daemon_->output();
  Connect();
  v1::RenewGangLeaseResponse response;
  ASSERT_TRUE(Renew(gang.id(), &response).ok());
  EXPECT_EQ(GetOk(*scheduler_, gang.id()).state(), v1::GANG_STATE_ADMITTED);
}

TEST_F(LauncherApiTest, LeaseDurationIsValidated) {
  StartWith(ConfigJson("0s"));
  v1::SubmitGangRequest request = SubmitRequest("a", 1, 8);
  request.mutable_spec()->mutable_lease_duration()->set_nanos(500000000);
  grpc::ClientContext context;
  v1::SubmitGangResponse response;
  grpc::Status status = scheduler_->SubmitGang(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("spec.lease_duration"));
}

// --- Events. ---

TEST_F(LauncherApiTest, ACheckpointIsAnEventAndBumpsTheRevision) {
  StartWith(ConfigJson("0s"));
  v1::Gang gang = SubmitLeased(0, 1);
  ASSERT_EQ(gang.state(), v1::GANG_STATE_ADMITTED);
  grpc::ClientContext context;
  v1::ReportGangRequest report;
  report.set_gang_id(gang.id());
  *report.mutable_last_checkpoint_time() = gang.admit_time();
  v1::ReportGangResponse response;
  grpc::Status status = scheduler_->ReportGang(&context, report, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_GT(response.revision(), gang.revision());
  EXPECT_EQ(response.gang().revision(), response.revision());
  const v1::GangEvent event =
      WaitFor(v1::EVENT_TYPE_CHECKPOINTED, gang.revision());
  EXPECT_EQ(event.revision(), response.revision());
  EXPECT_EQ(event.gang().id(), gang.id());
  EXPECT_EQ(event.gang().last_checkpoint_time().seconds(),
            report.last_checkpoint_time().seconds());
}

TEST_F(LauncherApiTest, APreemptingGangCarriesItsGraceDeadline) {
  StartWith(ConfigJson("0s", /*preemption=*/true));
  v1::Gang low = SubmitLeased(0);
  ASSERT_EQ(low.state(), v1::GANG_STATE_ADMITTED);
  EXPECT_FALSE(low.has_grace_deadline());
  v1::SubmitGangRequest high = SubmitRequest("a", 1, 8);
  high.mutable_spec()->set_priority(10);
  SubmitOk(*scheduler_, high);
  const v1::GangEvent event =
      WaitFor(v1::EVENT_TYPE_PREEMPTING, low.revision());
  EXPECT_EQ(event.gang().id(), low.id());
  ASSERT_TRUE(event.gang().has_grace_deadline());
  EXPECT_EQ(TimeUtil::TimestampToSeconds(event.gang().grace_deadline()) -
                TimeUtil::TimestampToSeconds(event.time()),
            60);
  v1::Gang preempting = GetOk(*scheduler_, low.id());
  EXPECT_EQ(preempting.grace_deadline().seconds(),
            event.gang().grace_deadline().seconds());
}

// --- FieldMask updates. ---

TEST_F(LauncherApiTest, UpdateConfigWithAMaskChangesOnlyTheNamedFields) {
  StartWith(ConfigJson("0s"));
  v1::Config before;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(
        admin_->GetConfig(&context, v1::GetConfigRequest(), &before).ok());
  }
  v1::UpdateConfigRequest request;
  request.mutable_config()->mutable_preemption()->set_enabled(true);
  request.mutable_config()->mutable_cycle_interval()->set_seconds(9);
  request.mutable_update_mask()->add_paths("preemption.enabled");
  v1::Config after;
  {
    grpc::ClientContext context;
    grpc::Status status = admin_->UpdateConfig(&context, request, &after);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_TRUE(after.preemption().enabled());
  EXPECT_EQ(after.cycle_interval().nanos(), 200000000);  // not in the mask
  EXPECT_EQ(after.cycle_interval().seconds(), 0);
  EXPECT_EQ(after.topology_levels_size(), 2);
  EXPECT_EQ(after.version(), before.version() + 1);
  // A bad path: INVALID_ARGUMENT naming it, and nothing changes.
  for (const char* bad : {"preemption.nope", "version", "priority_classes.x"}) {
    v1::UpdateConfigRequest wrong = request;
    wrong.mutable_config()->mutable_preemption()->set_enabled(false);
    wrong.mutable_update_mask()->add_paths(bad);
    grpc::ClientContext context;
    v1::Config unused;
    grpc::Status status = admin_->UpdateConfig(&context, wrong, &unused);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_THAT(status.error_message(), HasSubstr("update_mask.paths[1]"));
  }
  v1::Config now;
  grpc::ClientContext context;
  ASSERT_TRUE(admin_->GetConfig(&context, v1::GetConfigRequest(), &now).ok());
  EXPECT_EQ(now.version(), after.version());
  EXPECT_TRUE(now.preemption().enabled());
}

TEST_F(LauncherApiTest, PutQueueWithAMaskChangesOnlyTheNamedFields) {
  StartWith(ConfigJson("0s"));
  auto put = [&](const v1::PutQueueRequest& request, v1::Queue* out) {
    grpc::ClientContext context;
    return admin_->PutQueue(&context, request, out);
  };
  v1::PutQueueRequest create;
  create.mutable_queue()->set_name("c");
  create.mutable_queue()->set_borrowing_limit_gpus(-1);
  create.mutable_queue()->set_lending_limit_gpus(-1);
  v1::Queue queue;
  ASSERT_TRUE(put(create, &queue).ok());
  EXPECT_EQ(queue.weight(), 1);  // unset weight: 1
  create.mutable_queue()->set_weight(0);
  ASSERT_TRUE(put(create, &queue).ok());
  EXPECT_TRUE(queue.has_weight());
  EXPECT_EQ(queue.weight(), 0);  // an explicit 0 stays 0

  v1::PutQueueRequest update;
  update.mutable_queue()->set_name("c");
  update.mutable_queue()->set_held(true);
  update.mutable_queue()->set_weight(7);
  update.mutable_update_mask()->add_paths("held");
  ASSERT_TRUE(put(update, &queue).ok());
  EXPECT_TRUE(queue.held());
  EXPECT_EQ(queue.weight(), 0);  // not in the mask
  EXPECT_EQ(queue.borrowing_limit_gpus(), -1);

  update.mutable_update_mask()->add_paths("status");
  grpc::Status status = put(update, &queue);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("update_mask.paths[1]"));
  update.mutable_update_mask()->set_paths(1, "wieght");
  status = put(update, &queue);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("\"wieght\""));

  update.mutable_queue()->set_name("missing");
  update.mutable_update_mask()->mutable_paths()->RemoveLast();
  EXPECT_EQ(put(update, &queue).error_code(), grpc::StatusCode::NOT_FOUND);

  grpc::ClientContext context;
  v1::ListQueuesResponse list;
  ASSERT_TRUE(
      admin_->ListQueues(&context, v1::ListQueuesRequest(), &list).ok());
  for (const v1::Queue& q : list.queues()) {
    if (q.name() != "c") continue;
    EXPECT_TRUE(q.held());
    EXPECT_EQ(q.weight(), 0);
  }
}

// --- ListGangs. ---

TEST_F(LauncherApiTest, ListGangsPagesAreReadAtTheFirstPagesRevision) {
  StartWith(ConfigJson("0s"));
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(SubmitLeased(0, 1).id());
  v1::ListGangsRequest request;
  request.set_page_size(2);
  v1::ListGangsResponse first;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(scheduler_->ListGangs(&context, request, &first).ok());
  }
  ASSERT_EQ(first.gangs_size(), 2);
  ASSERT_FALSE(first.next_page_token().empty());
  // Changes after the first page do not show in the later ones.
  {
    grpc::ClientContext context;
    v1::CancelGangRequest cancel;
    cancel.set_gang_id(ids[4]);
    v1::CancelGangResponse response;
    ASSERT_TRUE(scheduler_->CancelGang(&context, cancel, &response).ok());
  }
  const std::string added = SubmitLeased(0, 1).id();
  std::vector<std::string> listed = {first.gangs(0).id(), first.gangs(1).id()};
  request.set_page_token(first.next_page_token());
  for (int page = 0; page < 10 && !request.page_token().empty(); ++page) {
    grpc::ClientContext context;
    v1::ListGangsResponse response;
    ASSERT_TRUE(scheduler_->ListGangs(&context, request, &response).ok());
    EXPECT_EQ(response.revision(), first.revision());
    for (const v1::Gang& gang : response.gangs()) {
      listed.push_back(gang.id());
      if (gang.id() == ids[4]) {
        EXPECT_EQ(gang.state(), v1::GANG_STATE_ADMITTED);
      }
    }
    request.set_page_token(response.next_page_token());
  }
  EXPECT_EQ(listed, ids);  // in id order, without the later gang
  EXPECT_EQ(std::count(listed.begin(), listed.end(), added), 0);

  // A token is for its own filter; page sizes above 1000 are refused.
  request.set_page_token(first.next_page_token());
  request.add_states(v1::GANG_STATE_PENDING);
  {
    grpc::ClientContext context;
    v1::ListGangsResponse response;
    EXPECT_EQ(scheduler_->ListGangs(&context, request, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  v1::ListGangsRequest big;
  big.set_page_size(1001);
  grpc::ClientContext context;
  v1::ListGangsResponse response;
  grpc::Status status = scheduler_->ListGangs(&context, big, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("page_size"));
}

TEST_F(LauncherApiTest, ATokenFromBeforeARestartReadsOnlyAtTheSameRevision) {
  StartWith(ConfigJson("0s"));
  for (int i = 0; i < 3; ++i) SubmitLeased(0, 1);
  v1::ListGangsRequest request;
  request.set_page_size(1);
  v1::ListGangsResponse first;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(scheduler_->ListGangs(&context, request, &first).ok());
  }
  request.set_page_token(first.next_page_token());
  auto restart_and_list = [&] {
    EXPECT_EQ(daemon_->Terminate(), 0);
    EXPECT_TRUE(daemon_->Start()) << daemon_->output();
    Connect();
    grpc::ClientContext context;
    v1::ListGangsResponse response;
    return scheduler_->ListGangs(&context, request, &response).error_code();
  };
  // Nothing written since: the restarted daemon serves that revision.
  EXPECT_EQ(restart_and_list(), grpc::StatusCode::OK);
  // Once it moved on, a restart keeps no view of the token's revision.
  SubmitLeased(0, 1);
  EXPECT_EQ(restart_and_list(), grpc::StatusCode::ABORTED);
}

// --- Nodes. ---

TEST_F(LauncherApiTest, UpsertNodesRefusesAStateChangeAndKeepsAddresses) {
  StartWith(ConfigJson("0s"));
  {
    grpc::ClientContext context;
    v1::SetNodeStateRequest request;
    request.set_node_id("node-000");
    request.set_state(v1::NODE_STATE_CORDONED);
    v1::SetNodeStateResponse response;
    ASSERT_TRUE(fleet_->SetNodeState(&context, request, &response).ok());
  }
  v1::Node node;
  node.set_id("node-000");
  node.set_gpu_model("H100");
  node.set_gpu_count(8);
  (*node.mutable_labels())["block"] = "b0";
  (*node.mutable_labels())["rack"] = "b0-r0";
  auto upsert = [&](const std::vector<v1::Node>& nodes,
                    v1::UpsertNodesResponse* out) {
    grpc::ClientContext context;
    v1::UpsertNodesRequest request;
    for (const v1::Node& n : nodes) *request.add_nodes() = n;
    return fleet_->UpsertNodes(&context, request, out);
  };
  v1::UpsertNodesResponse response;
  node.set_state(v1::NODE_STATE_READY);
  grpc::Status status = upsert({node}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("nodes[0].state"));
  EXPECT_THAT(status.error_message(), HasSubstr("SetNodeState"));
  // Without a state (or with the current one) it keeps the state.
  node.set_state(v1::NODE_STATE_UNSPECIFIED);
  node.set_address("10.0.0.7");
  v1::Node fresh = node;
  fresh.set_id("node-new");
  fresh.set_address("");
  fresh.set_state(v1::NODE_STATE_DRAINING);
  ASSERT_TRUE(upsert({node, fresh}, &response).ok());
  ASSERT_EQ(response.nodes_size(), 2);
  EXPECT_EQ(response.nodes(0).state(), v1::NODE_STATE_CORDONED);
  EXPECT_EQ(response.nodes(0).address(), "10.0.0.7");
  EXPECT_EQ(response.nodes(1).state(), v1::NODE_STATE_DRAINING);
  EXPECT_EQ(response.nodes(1).address(), "node-new");  // the id by default
  node.set_address("has space");
  status = upsert({node}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("nodes[0].address"));

  grpc::ClientContext context;
  v1::ListNodesResponse list;
  ASSERT_TRUE(fleet_->ListNodes(&context, v1::ListNodesRequest(), &list).ok());
  int seen = 0;
  for (const v1::Node& n : list.nodes()) {
    EXPECT_FALSE(n.address().empty()) << n.id();
    if (n.id() == "node-000") {
      EXPECT_EQ(n.address(), "10.0.0.7");
      ++seen;
    }
  }
  EXPECT_EQ(seen, 1);
}

// --- Start and stop. ---

TEST_F(LauncherApiTest, PrintAddressFileHoldsTheBoundAddresses) {
  DaemonProcess probe;  // only for a path in a fresh temporary directory
  const std::string path = probe.WriteFile("addresses.json", "");
  std::remove(path.c_str());
  StartWith(ConfigJson("0s"), {"--print-address-file=" + path});
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::smatch match;
  const std::string json = text.str();
  ASSERT_TRUE(std::regex_search(
      json, match,
      std::regex(
          R"re(\{"grpc": "([^"]+)", "metrics": "[^"]+:(\d+)", "pid": (\d+)\})re")))
      << json;
  EXPECT_EQ(match[1].str(), daemon_->address());
  EXPECT_EQ(std::stoi(match[2].str()), daemon_->metrics_port());
  EXPECT_EQ(std::stoi(match[3].str()), daemon_->pid());
}

TEST_F(LauncherApiTest, SigtermStopsAndReportsTheTimeItTook) {
  StartWith(ConfigJson("0s"));
  SubmitLeased(0, 1);
  const auto before = std::chrono::steady_clock::now();
  ASSERT_EQ(daemon_->Terminate(), 0) << daemon_->output();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - before)
          .count();
  std::smatch match;
  const std::string& output = daemon_->output();
  ASSERT_TRUE(std::regex_search(
      output, match,
      std::regex(R"(stopped in (\d+\.\d+) s \(watch [0-9.]+, grpc [0-9.]+, )"
                 R"(loop [0-9.]+, grpc-threads [0-9.]+, metrics [0-9.]+, )"
                 R"(rest [0-9.]+\))")))
      << output;
  // What the daemon reports lies within what the test saw (it covers the
  // destructors too, which ran before the process exited).
  EXPECT_LE(std::stod(match[1].str()), elapsed + 0.001);
}

TEST(PhalanxdVersionTest, PrintsTheVersion) {
  FILE* pipe = popen(PHALANXD_PATH " --version", "r");
  ASSERT_NE(pipe, nullptr);
  char buffer[256] = {};
  const size_t n = fread(buffer, 1, sizeof(buffer) - 1, pipe);
  EXPECT_EQ(pclose(pipe), 0);
  EXPECT_THAT(std::string(buffer, n), ::testing::StartsWith("phalanxd 0."));
}

}  // namespace
}  // namespace phalanx::testing
