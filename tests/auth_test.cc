// Authorization over real gRPC: every RPC x every role x own queue / other
// queue / no credentials / wrong token / expired principal, each checking
// the code AND that a refused call changed nothing (revision, config
// version, queues, nodes).
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/auth_client.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

constexpr char kAdmin[] = "admin-token-0123456789";
constexpr char kTenant[] = "tenant-a-token-0123456789";
constexpr char kViewer[] = "viewer-token-0123456789";
constexpr char kAgent[] = "agent-token-0123456789";
constexpr char kExpired[] = "expired-token-0123456789";
constexpr char kWrong[] = "no-such-token";

std::string DemoAuthJson() {
  return AuthJson({
      PrincipalJson("ops", kAdmin, {"ROLE_ADMIN"}),
      PrincipalJson("team-a", kTenant, {"ROLE_TENANT"}, {"a"}),
      PrincipalJson("dash", kViewer, {"ROLE_VIEWER"}),
      PrincipalJson("agent", kAgent, {"ROLE_NODE_AGENT"}),
      PrincipalJson("old", kExpired, {"ROLE_ADMIN"}, {},
                    R"("expiresAt":"2020-01-01T00:00:00Z")"),
  });
}

struct Stubs {
  std::unique_ptr<v1::Scheduler::Stub> scheduler;
  std::unique_ptr<v1::Fleet::Stub> fleet;
  std::unique_ptr<v1::Admin::Stub> admin;
};

// What the calls act on: a gang of queue a (owned by team-a) and one of b.
struct Targets {
  std::string own_gang;
  std::string other_gang;
};

using Call = std::function<grpc::Status(Stubs&, const Targets&,
                                        const std::string& token)>;

template <typename Request, typename Response, typename Method>
Call Unary(Method method, std::function<Request(const Targets&)> make) {
  return [method, make](Stubs& stubs, const Targets& targets,
                        const std::string& token) {
    Response response;
    auto context = WithToken(token);
    return method(stubs, context.get(), make(targets), &response);
  };
}

grpc::Status Watch(Stubs& stubs, const Targets&, const std::string& token) {
  auto context = WithToken(token);
  v1::WatchGangsRequest request;
  request.set_after_revision(0);
  auto reader = stubs.scheduler->WatchGangs(context.get(), request);
  v1::GangEvent event;
  if (reader->Read(&event)) {
    context->TryCancel();
    reader->Finish();
    return grpc::Status::OK;
  }
  return reader->Finish();
}

v1::SubmitGangRequest Submit(const std::string& queue) {
  return SubmitRequest(queue, 1, 1);
}

// Who may call, and which queue it touches.
enum class Scope { kNone, kOwn, kOther };
struct Rpc {
  std::string name;
  Call call;
  std::set<std::string> allowed;  // principal names allowed (queues aside)
  Scope scope = Scope::kNone;
  // The code a tenant gets for the other queue (NOT_FOUND for gangs).
  grpc::StatusCode other_queue_code = grpc::StatusCode::PERMISSION_DENIED;
};

#define SCHED(method)                             \
  [](Stubs& s, auto* c, const auto& r, auto* o) { \
    return s.scheduler->method(c, r, o);          \
  }
#define FLEET(method)                             \
  [](Stubs& s, auto* c, const auto& r, auto* o) { \
    return s.fleet->method(c, r, o);              \
  }
#define ADMIN(method)                             \
  [](Stubs& s, auto* c, const auto& r, auto* o) { \
    return s.admin->method(c, r, o);              \
  }

template <typename Request>
Request WithGang(const std::string& id) {
  Request request;
  request.set_gang_id(id);
  return request;
}

std::vector<Rpc> AllRpcs() {
  const std::set<std::string> writers = {"ops", "team-a"};
  const std::set<std::string> readers = {"ops", "team-a", "dash"};
  const std::set<std::string> admins = {"ops"};
  const std::set<std::string> agents = {"ops", "agent"};
  const std::set<std::string> everyone = {"ops", "team-a", "dash", "agent"};
  using Code = grpc::StatusCode;
  std::vector<Rpc> rpcs;
  for (Scope scope : {Scope::kOwn, Scope::kOther}) {
    const bool own = scope == Scope::kOwn;
    const std::string queue = own ? "a" : "b";
    const std::string suffix = own ? "(own)" : "(other)";
    auto gang = [own](const Targets& t) {
      return own ? t.own_gang : t.other_gang;
    };
    rpcs.push_back({"SubmitGang" + suffix,
                    Unary<v1::SubmitGangRequest, v1::SubmitGangResponse>(
                        SCHED(SubmitGang),
                        [queue](const Targets&) { return Submit(queue); }),
                    writers, scope});
    rpcs.push_back({"DryRunGang" + suffix,
                    Unary<v1::DryRunGangRequest, v1::DryRunGangResponse>(
                        SCHED(DryRunGang),
                        [queue](const Targets&) {
                          v1::DryRunGangRequest r;
                          *r.mutable_spec() = Submit(queue).spec();
                          return r;
                        }),
                    writers, scope});
    rpcs.push_back({"ListGangs" + suffix,
                    Unary<v1::ListGangsRequest, v1::ListGangsResponse>(
                        SCHED(ListGangs),
                        [queue](const Targets&) {
                          v1::ListGangsRequest r;
                          r.set_queue(queue);
                          return r;
                        }),
                    readers, scope});
    rpcs.push_back({"GetGang" + suffix,
                    Unary<v1::GetGangRequest, v1::GetGangResponse>(
                        SCHED(GetGang),
                        [gang](const Targets& t) {
                          return WithGang<v1::GetGangRequest>(gang(t));
                        }),
                    readers, scope, Code::NOT_FOUND});
    rpcs.push_back({"ExplainGang" + suffix,
                    Unary<v1::ExplainGangRequest, v1::ExplainGangResponse>(
                        SCHED(ExplainGang),
                        [gang](const Targets& t) {
                          return WithGang<v1::ExplainGangRequest>(gang(t));
                        }),
                    readers, scope, Code::NOT_FOUND});
    rpcs.push_back({"ReportGang" + suffix,
                    Unary<v1::ReportGangRequest, v1::ReportGangResponse>(
                        SCHED(ReportGang),
                        [gang](const Targets& t) {
                          auto r = WithGang<v1::ReportGangRequest>(gang(t));
                          r.set_state(v1::GANG_STATE_RUNNING);
                          return r;
                        }),
                    writers, scope, Code::NOT_FOUND});
    rpcs.push_back({"CancelGang" + suffix,
                    Unary<v1::CancelGangRequest, v1::CancelGangResponse>(
                        SCHED(CancelGang),
                        [gang](const Targets& t) {
                          return WithGang<v1::CancelGangRequest>(gang(t));
                        }),
                    writers, scope, Code::NOT_FOUND});
  }
  rpcs.push_back({"WatchGangs", Watch, readers});
  rpcs.push_back({"UpsertNodes",
                  Unary<v1::UpsertNodesRequest, v1::UpsertNodesResponse>(
                      FLEET(UpsertNodes),
                      [](const Targets&) {
                        v1::UpsertNodesRequest r;
                        v1::Node* node = r.add_nodes();
                        node->set_id("node-new");
                        node->set_gpu_model("H100");
                        node->set_gpu_count(8);
                        (*node->mutable_labels())["block"] = "b9";
                        (*node->mutable_labels())["rack"] = "b9-r0";
                        return r;
                      }),
                  admins});
  rpcs.push_back({"SetNodeState(cordon)",
                  Unary<v1::SetNodeStateRequest, v1::SetNodeStateResponse>(
                      FLEET(SetNodeState),
                      [](const Targets&) {
                        v1::SetNodeStateRequest r;
                        r.set_node_id("node-111");
                        r.set_state(v1::NODE_STATE_CORDONED);
                        return r;
                      }),
                  admins});
  rpcs.push_back({"SetNodeState(unhealthy)",
                  Unary<v1::SetNodeStateRequest, v1::SetNodeStateResponse>(
                      FLEET(SetNodeState),
                      [](const Targets&) {
                        v1::SetNodeStateRequest r;
                        r.set_node_id("node-110");
                        r.set_state(v1::NODE_STATE_UNHEALTHY);
                        return r;
                      }),
                  agents});
  rpcs.push_back({"RemoveNode",
                  Unary<v1::RemoveNodeRequest, v1::RemoveNodeResponse>(
                      FLEET(RemoveNode),
                      [](const Targets&) {
                        v1::RemoveNodeRequest r;
                        r.set_node_id("node-101");
                        return r;
                      }),
                  admins});
  rpcs.push_back({"Heartbeat",
                  Unary<v1::HeartbeatRequest, v1::HeartbeatResponse>(
                      FLEET(Heartbeat),
                      [](const Targets&) {
                        v1::HeartbeatRequest r;
                        r.add_node_ids("node-000");
                        return r;
                      }),
                  agents});
  rpcs.push_back(
      {"ReportNodeHealth",
       Unary<v1::ReportNodeHealthRequest, v1::ReportNodeHealthResponse>(
           FLEET(ReportNodeHealth),
           [](const Targets&) {
             v1::ReportNodeHealthRequest r;
             r.set_node_id("node-100");
             r.set_healthy(true);
             r.add_unhealthy_gpus(7);
             return r;
           }),
       agents});
  rpcs.push_back({"ListNodes",
                  Unary<v1::ListNodesRequest, v1::ListNodesResponse>(
                      FLEET(ListNodes),
                      [](const Targets&) { return v1::ListNodesRequest(); }),
                  everyone});
  rpcs.push_back({"GetTopology",
                  Unary<v1::GetTopologyRequest, v1::GetTopologyResponse>(
                      FLEET(GetTopology),
                      [](const Targets&) { return v1::GetTopologyRequest(); }),
                  everyone});
  rpcs.push_back({"GetConfig",
                  Unary<v1::GetConfigRequest, v1::Config>(
                      ADMIN(GetConfig),
                      [](const Targets&) { return v1::GetConfigRequest(); }),
                  everyone});
  rpcs.push_back({"ListQueues",
                  Unary<v1::ListQueuesRequest, v1::ListQueuesResponse>(
                      ADMIN(ListQueues),
                      [](const Targets&) { return v1::ListQueuesRequest(); }),
                  everyone});
  rpcs.push_back({"UpdateConfig",
                  Unary<v1::UpdateConfigRequest, v1::Config>(
                      ADMIN(UpdateConfig),
                      [](const Targets&) {
                        v1::UpdateConfigRequest r;
                        r.mutable_config()->add_topology_levels("block");
                        r.mutable_config()->add_topology_levels("rack");
                        r.mutable_config()->mutable_preemption()->set_enabled(
                            true);
                        return r;
                      }),
                  admins});
  rpcs.push_back({"PutQueue",
                  Unary<v1::PutQueueRequest, v1::Queue>(
                      ADMIN(PutQueue),
                      [](const Targets&) {
                        v1::PutQueueRequest r;
                        r.mutable_queue()->set_name("c");
                        r.mutable_queue()->set_weight(1);
                        (*r.mutable_queue()->mutable_nominal_gpus())["H100"] =
                            100000;
                        return r;
                      }),
                  admins});
  rpcs.push_back({"DeleteQueue",
                  Unary<v1::DeleteQueueRequest, v1::DeleteQueueResponse>(
                      ADMIN(DeleteQueue),
                      [](const Targets&) {
                        v1::DeleteQueueRequest r;
                        r.set_name("b");
                        return r;
                      }),
                  admins});
  rpcs.push_back(
      {"ListAuditRecords",
       Unary<v1::ListAuditRecordsRequest, v1::ListAuditRecordsResponse>(
           ADMIN(ListAuditRecords),
           [](const Targets&) { return v1::ListAuditRecordsRequest(); }),
       admins});
  // A relative path: an admin passes the gate and gets INVALID_ARGUMENT, so
  // no backup is written.
  rpcs.push_back({"CreateBackup",
                  Unary<v1::CreateBackupRequest, v1::CreateBackupResponse>(
                      ADMIN(CreateBackup),
                      [](const Targets&) {
                        v1::CreateBackupRequest r;
                        r.set_directory("backup");
                        return r;
                      }),
                  admins});
  rpcs.push_back(
      {"ExportHistory",
       Unary<v1::ExportHistoryRequest, v1::ExportHistoryResponse>(
           ADMIN(ExportHistory),
           [](const Targets&) { return v1::ExportHistoryRequest(); }),
       admins});
  return rpcs;
}

// Everything a refused call must leave alone.
struct StateSnapshot {
  int64_t revision = 0;
  int64_t config_version = 0;
  v1::ListQueuesResponse queues;
  v1::ListNodesResponse nodes;
  bool operator==(const StateSnapshot& o) const {
    using google::protobuf::util::MessageDifferencer;
    return revision == o.revision && config_version == o.config_version &&
           MessageDifferencer::Equals(queues, o.queues) &&
           MessageDifferencer::Equals(nodes, o.nodes);
  }
};

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = StartDemoDaemon();
    daemon_->AddArgs(
        {"--auth=" + daemon_->WriteFile("auth.json", DemoAuthJson())});
    ASSERT_TRUE(daemon_->Start()) << daemon_->output();
    stubs_ = {daemon_->Scheduler(), daemon_->Fleet(), daemon_->Admin()};
    targets_.own_gang = SubmitAs(kTenant, "a");
    targets_.other_gang = SubmitAs(kAdmin, "b");
  }

  std::string SubmitAs(const std::string& token, const std::string& queue) {
    v1::SubmitGangResponse response;
    auto context = WithToken(token);
    grpc::Status status =
        stubs_.scheduler->SubmitGang(context.get(), Submit(queue), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.gang().id();
  }

  StateSnapshot Snapshot() {
    StateSnapshot snapshot;
    {
      auto context = WithToken(kAdmin);
      v1::ListGangsResponse gangs;
      EXPECT_TRUE(stubs_.scheduler
                      ->ListGangs(context.get(), v1::ListGangsRequest(), &gangs)
                      .ok());
      snapshot.revision = gangs.revision();
    }
    {
      auto context = WithToken(kAdmin);
      v1::Config config;
      EXPECT_TRUE(
          stubs_.admin
              ->GetConfig(context.get(), v1::GetConfigRequest(), &config)
              .ok());
      snapshot.config_version = config.version();
    }
    {
      auto context = WithToken(kAdmin);
      v1::ListQueuesResponse& queues = snapshot.queues;
      EXPECT_TRUE(
          stubs_.admin
              ->ListQueues(context.get(), v1::ListQueuesRequest(), &queues)
              .ok());
      for (v1::Queue& q : *queues.mutable_queues()) q.clear_status();
    }
    {
      auto context = WithToken(kAdmin);
      v1::ListNodesResponse& nodes = snapshot.nodes;
      EXPECT_TRUE(
          stubs_.fleet->ListNodes(context.get(), v1::ListNodesRequest(), &nodes)
              .ok());
      for (v1::Node& n : *nodes.mutable_nodes()) n.clear_last_heartbeat();
    }
    return snapshot;
  }

  std::unique_ptr<DaemonProcess> daemon_;
  Stubs stubs_;
  Targets targets_;
};

TEST_F(AuthTest, RefusedCallsGetTheirCodeAndChangeNothing) {
  struct Credential {
    std::string principal;  // "" = not a principal
    std::string token;
  };
  const std::vector<Credential> credentials = {
      {"", ""},          {"", kWrong},        {"", kExpired},
      {"ops", kAdmin},   {"team-a", kTenant}, {"dash", kViewer},
      {"agent", kAgent},
  };
  int refused = 0;
  for (const Rpc& rpc : AllRpcs()) {
    for (const Credential& credential : credentials) {
      grpc::StatusCode expected = grpc::StatusCode::OK;
      if (credential.principal.empty()) {
        expected = grpc::StatusCode::UNAUTHENTICATED;
      } else if (!rpc.allowed.contains(credential.principal)) {
        expected = grpc::StatusCode::PERMISSION_DENIED;
      } else if (credential.principal == "team-a" &&
                 rpc.scope == Scope::kOther) {
        expected = rpc.other_queue_code;
      }
      if (expected == grpc::StatusCode::OK) continue;  // the next test
      const StateSnapshot before = Snapshot();
      grpc::Status status = rpc.call(stubs_, targets_, credential.token);
      EXPECT_EQ(status.error_code(), expected)
          << rpc.name << " as " << credential.token << ": "
          << status.error_message();
      EXPECT_TRUE(Snapshot() == before)
          << rpc.name << " as " << credential.token << " changed state";
      if (expected == grpc::StatusCode::PERMISSION_DENIED) {
        EXPECT_TRUE(absl::StrContains(status.error_message(),
                                      "\"" + credential.principal + "\""))
            << rpc.name << ": " << status.error_message();
      }
      ++refused;
    }
  }
  EXPECT_GT(refused, 60);
}

TEST_F(AuthTest, AllowedCallsPassTheGate) {
  const std::vector<std::pair<std::string, std::string>> principals = {
      {"ops", kAdmin},
      {"team-a", kTenant},
      {"dash", kViewer},
      {"agent", kAgent}};
  for (const Rpc& rpc : AllRpcs()) {
    for (const auto& [principal, token] : principals) {
      if (!rpc.allowed.contains(principal)) continue;
      if (principal == "team-a" && rpc.scope == Scope::kOther) continue;
      grpc::Status status = rpc.call(stubs_, targets_, token);
      EXPECT_NE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << rpc.name << " as " << principal;
      EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
          << rpc.name << " as " << principal << ": " << status.error_message();
      EXPECT_NE(status.error_code(), grpc::StatusCode::NOT_FOUND)
          << rpc.name << " as " << principal << ": " << status.error_message();
    }
  }
}

TEST_F(AuthTest, GangsRecordTheirOwner) {
  auto context = WithToken(kViewer);
  v1::GetGangRequest request;
  request.set_gang_id(targets_.own_gang);
  v1::GetGangResponse response;
  ASSERT_TRUE(
      stubs_.scheduler->GetGang(context.get(), request, &response).ok());
  EXPECT_EQ(response.gang().owner(), "team-a");
}

TEST_F(AuthTest, TenantsListAndWatchOnlyTheirQueues) {
  for (int i = 0; i < 3; ++i) SubmitAs(kAdmin, "b");
  SubmitAs(kTenant, "a");
  {
    auto context = WithToken(kTenant);
    v1::ListGangsResponse response;
    ASSERT_TRUE(
        stubs_.scheduler
            ->ListGangs(context.get(), v1::ListGangsRequest(), &response)
            .ok());
    ASSERT_EQ(response.gangs_size(), 2);
    for (const v1::Gang& gang : response.gangs()) {
      EXPECT_EQ(gang.spec().queue(), "a");
    }
  }
  // From revision 0: every event up to a bookmark at the head, none of b.
  auto context = WithToken(kTenant);
  v1::WatchGangsRequest request;
  request.set_after_revision(0);
  auto reader = stubs_.scheduler->WatchGangs(context.get(), request);
  v1::GangEvent event;
  int events = 0;
  while (reader->Read(&event)) {
    if (event.type() == v1::EVENT_TYPE_BOOKMARK) break;
    EXPECT_EQ(event.gang().spec().queue(), "a") << event.DebugString();
    ++events;
  }
  EXPECT_GE(events, 2);  // two submits (and admissions) of queue a
  context->TryCancel();
  reader->Finish();
  // WatchGangBatches: the same events, b's left out of every batch.
  auto batch_context = WithToken(kTenant);
  auto batches =
      stubs_.scheduler->WatchGangBatches(batch_context.get(), request);
  v1::GangEventBatch batch;
  int batched = 0;
  int bookmarks = 0;  // bounds the loop should an event be missing
  while (batched < events && bookmarks < 3 && batches->Read(&batch)) {
    for (const v1::GangEvent& e : batch.events()) {
      if (e.type() == v1::EVENT_TYPE_BOOKMARK) {
        ++bookmarks;
        continue;
      }
      EXPECT_EQ(e.gang().spec().queue(), "a") << e.DebugString();
      ++batched;
    }
  }
  EXPECT_EQ(batched, events);
  batch_context->TryCancel();
  batches->Finish();
  // ListNodes hides the ids of b's gangs from the tenant.
  auto nodes_context = WithToken(kTenant);
  v1::ListNodesResponse nodes;
  ASSERT_TRUE(
      stubs_.fleet
          ->ListNodes(nodes_context.get(), v1::ListNodesRequest(), &nodes)
          .ok());
  int shown = 0;
  for (const v1::Node& node : nodes.nodes()) {
    for (const std::string& id : node.gang_ids()) {
      EXPECT_NE(id, targets_.other_gang);
      ++shown;
    }
  }
  EXPECT_EQ(shown, 2);
}

TEST_F(AuthTest, NodeAgentsNeverUndoAnAdminsCordon) {
  auto set_state = [&](const std::string& token, v1::NodeState state) {
    auto context = WithToken(token);
    v1::SetNodeStateRequest request;
    request.set_node_id("node-001");
    request.set_state(state);
    v1::SetNodeStateResponse response;
    return stubs_.fleet->SetNodeState(context.get(), request, &response)
        .error_code();
  };
  using Code = grpc::StatusCode;
  EXPECT_EQ(set_state(kAgent, v1::NODE_STATE_UNHEALTHY), Code::OK);
  EXPECT_EQ(set_state(kAgent, v1::NODE_STATE_READY), Code::OK);
  EXPECT_EQ(set_state(kAdmin, v1::NODE_STATE_CORDONED), Code::OK);
  EXPECT_EQ(set_state(kAgent, v1::NODE_STATE_READY), Code::PERMISSION_DENIED);
  EXPECT_EQ(set_state(kAgent, v1::NODE_STATE_UNHEALTHY),
            Code::PERMISSION_DENIED);
  EXPECT_EQ(set_state(kAgent, v1::NODE_STATE_DRAINING),
            Code::PERMISSION_DENIED);
}

TEST_F(AuthTest, RefusalsAndAdminChangesAreAudited) {
  {
    auto context = WithToken(kTenant);
    v1::PutQueueRequest request;
    request.mutable_queue()->set_name("a");
    v1::Queue response;
    EXPECT_EQ(
        stubs_.admin->PutQueue(context.get(), request, &response).error_code(),
        grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    auto context = WithToken(kAdmin);
    v1::CancelGangRequest request;
    request.set_gang_id(targets_.own_gang);  // team-a's gang
    v1::CancelGangResponse response;
    EXPECT_TRUE(
        stubs_.scheduler->CancelGang(context.get(), request, &response).ok());
  }
  {
    auto context = WithToken("");
    v1::Config response;
    EXPECT_EQ(stubs_.admin
                  ->GetConfig(context.get(), v1::GetConfigRequest(), &response)
                  .error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  // Refusals reach the log with the next batch (at most a cycle later).
  std::vector<v1::AuditRecord> records;
  for (int attempt = 0; attempt < 50 && records.size() < 3; ++attempt) {
    absl::SleepFor(absl::Milliseconds(100));
    auto context = WithToken(kAdmin);
    v1::ListAuditRecordsResponse response;
    ASSERT_TRUE(stubs_.admin
                    ->ListAuditRecords(context.get(),
                                       v1::ListAuditRecordsRequest(), &response)
                    .ok());
    records.assign(response.records().begin(), response.records().end());
  }
  std::set<std::string> seen;
  for (const v1::AuditRecord& r : records) {
    seen.insert(absl::StrCat(r.principal(), " ", r.method(), " ", r.outcome()));
  }
  EXPECT_TRUE(
      seen.contains("team-a /phalanx.v1.Admin/PutQueue PERMISSION_DENIED"));
  EXPECT_TRUE(seen.contains("ops /phalanx.v1.Scheduler/CancelGang OK"));
  EXPECT_TRUE(seen.contains(" /phalanx.v1.Admin/GetConfig UNAUTHENTICATED"));
  for (const v1::AuditRecord& r : records) {
    EXPECT_FALSE(absl::StrContains(r.summary(), kTenant));
    EXPECT_FALSE(absl::StrContains(r.summary(), Sha256Hex(kTenant)));
  }
}

TEST_F(AuthTest, MalformedCredentialsAreRefused) {
  const std::vector<std::vector<std::string>> headers = {
      {"Bearer"},
      {"Bearer "},
      {std::string("bearer ") + kAdmin},
      {std::string("Basic ") + kAdmin},
      {std::string(kAdmin)},
      {std::string("Bearer ") + kAdmin + " "},
      {std::string("Bearer ") + kAdmin, std::string("Bearer ") + kAdmin},
      {std::string("Bearer ") + kViewer, std::string("Bearer ") + kAdmin},
  };
  for (const auto& values : headers) {
    grpc::ClientContext context;
    for (const std::string& value : values) {
      context.AddMetadata("authorization", value);
    }
    v1::PutQueueRequest request;
    request.mutable_queue()->set_name("z");
    v1::Queue response;
    EXPECT_EQ(stubs_.admin->PutQueue(&context, request, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED)
        << values.front() << " (" << values.size() << " headers)";
  }
}

TEST_F(AuthTest, NoTokenOrHashReachesTheLog) {
  auto context = WithToken(kWrong);
  v1::Config response;
  stubs_.admin->GetConfig(context.get(), v1::GetConfigRequest(), &response);
  daemon_->Terminate();
  for (const char* secret : {kAdmin, kTenant, kViewer, kAgent, kWrong}) {
    EXPECT_FALSE(absl::StrContains(daemon_->output(), secret));
    EXPECT_FALSE(absl::StrContains(daemon_->output(), Sha256Hex(secret)));
  }
}

}  // namespace
}  // namespace phalanx::testing
