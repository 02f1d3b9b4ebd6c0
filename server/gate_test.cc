// The gate's contract (server/gate.h) over real gRPC on loopback: a generic
// callback service admits every call through the gate and answers with the
// gate's status, so the client sees what a handler's caller would.
#include "server/gate.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "phalanx/v1/scheduler.grpc.pb.h"
#include "server/auth.h"
#include "server/status.h"
#include "storage/sync/handoff.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

// What the gate counted and recorded. Thread-safe (gRPC's threads call it).
class Recorder : public DenialCounter, public AuditSink {
 public:
  void OnDenied(const RpcMethod& method, absl::string_view reason) override {
    MutexLock lock(&mu_);
    denials_.push_back(std::string(method.name) + " " + std::string(reason));
  }
  void Record(AuditEntry entry) override {
    MutexLock lock(&mu_);
    entries_.push_back(std::move(entry));
  }
  std::vector<std::string> denials() {
    MutexLock lock(&mu_);
    return denials_;
  }
  std::vector<AuditEntry> entries() {
    MutexLock lock(&mu_);
    return entries_;
  }

 private:
  Mutex mu_;
  std::vector<std::string> denials_ ABSL_GUARDED_BY(mu_);
  std::vector<AuditEntry> entries_ ABSL_GUARDED_BY(mu_);
};

const RpcMethod* MethodNamed(const std::string& name) {
  for (const RpcMethod* method :
       {&rpc::kSubmitGang, &rpc::kGetGang, &rpc::kPutQueue}) {
    if (name == method->name) return method;
  }
  return nullptr;
}

// Answers every call with what Gate::Admit says (OK once admitted).
class AdmitService : public grpc::CallbackGenericService {
 public:
  explicit AdmitService(Gate* gate) : gate_(gate) {}
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    const RpcMethod* method = MethodNamed(context->method());
    grpc::Status status(grpc::StatusCode::UNIMPLEMENTED, context->method());
    if (method != nullptr) {
      absl::StatusOr<Caller> caller = gate_->Admit(*context, *method, "tgt");
      status = caller.ok() ? grpc::Status::OK : ToGrpc(caller.status());
    }
    // For Answered: gRPC answers the call only after this returns.
    HandoffRelease(this);
    return new Answer(status);
  }

 private:
  // A unary call's answer: an empty response message when OK.
  class Answer : public grpc::ServerGenericBidiReactor {
   public:
    explicit Answer(const grpc::Status& status) {
      if (status.ok()) {
        grpc::Slice empty("");
        response_ = grpc::ByteBuffer(&empty, 1);
        StartWriteAndFinish(&response_, grpc::WriteOptions(), status);
      } else {
        Finish(status);
      }
      // CreateReactor returns this reactor to gRPC, which runs OnDone on
      // another thread (ordered inside libgrpc): storage/sync/handoff.h.
      HandoffRelease(this);
    }
    void OnDone() override {
      HandoffAcquire(this);
      delete this;
    }

   private:
    grpc::ByteBuffer response_;
  };
  Gate* gate_;
};

auth::Principal Principal(const std::string& name, uint32_t roles,
                          const std::string& token) {
  auth::Principal p;
  p.name = name;
  p.roles = roles;
  p.token_sha256 = Sha256Of(token);
  return p;
}

class GateAdmitTest : public ::testing::Test {
 protected:
  GateAdmitTest() {
    auth::AuthPolicy policy;
    policy.principals.push_back(Principal("alice", auth::kAdmin, "alice-t"));
    policy.principals.push_back(Principal("vic", auth::kViewer, "vic-t"));
    auth::Principal slow = Principal("slow", auth::kAdmin, "slow-t");
    slow.requests_per_second = 0.001;  // no refill within a test
    slow.request_burst = 2;
    policy.principals.push_back(std::move(slow));
    authenticator_ = std::make_unique<Authenticator>(std::move(policy));
    gate_ =
        std::make_unique<Gate>(authenticator_.get(), &recorder_, &recorder_);
    service_ = std::make_unique<AdmitService>(gate_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterCallbackGenericService(service_.get());
    server_ = builder.BuildAndStart();
    stub_ = v1::Scheduler::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                            grpc::InsecureChannelCredentials()));
  }
  ~GateAdmitTest() override { server_->Shutdown(); }

  // GetGang with `token` ("" = none); fills the leader trailer if any.
  grpc::Status Get(const std::string& token, std::string* leader = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::GetGangRequest request;
    v1::GetGangResponse response;
    grpc::Status status = stub_->GetGang(&context, request, &response);
    Answered();
    if (leader != nullptr) {
      auto [first, last] =
          context.GetServerTrailingMetadata().equal_range(kLeaderMetadataKey);
      *leader = first == last
                    ? ""
                    : std::string(first->second.data(), first->second.size());
    }
    return status;
  }
  grpc::Status Submit(const std::string& token) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    context.AddMetadata("authorization", "Bearer " + token);
    v1::SubmitGangRequest request;
    v1::SubmitGangResponse response;
    grpc::Status status = stub_->SubmitGang(&context, request, &response);
    Answered();
    return status;
  }
  // A blocking call returned, so the handler that answered it has returned
  // (ordered by gRPC, through the connection): what it did, such as reading
  // a test's ReplicaRole, happens before the test goes on (storage/sync/
  // handoff.h).
  void Answered() { HandoffAcquire(service_.get()); }

  Recorder recorder_;
  std::unique_ptr<Authenticator> authenticator_;
  std::unique_ptr<Gate> gate_;
  std::unique_ptr<AdmitService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
};

TEST_F(GateAdmitTest, AdmitsAKnownPrincipalWhoseRolesAllowTheMethod) {
  EXPECT_TRUE(Get("alice-t").ok());
  EXPECT_TRUE(Get("vic-t").ok());  // viewers read gangs
  EXPECT_TRUE(Submit("alice-t").ok());
  EXPECT_TRUE(recorder_.denials().empty());
  EXPECT_TRUE(recorder_.entries().empty());
}

TEST_F(GateAdmitTest, RefusesAnUnknownTokenCountedAndAuditedWithoutAName) {
  const grpc::Status status = Get("wrong");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(status.error_message().find("wrong"), std::string::npos)
      << "the message must not name the token: " << status.error_message();
  EXPECT_EQ(Get("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const std::vector<std::string> denials = recorder_.denials();
  ASSERT_EQ(denials.size(), 2u);
  EXPECT_EQ(denials[0], "/phalanx.v1.Scheduler/GetGang unauthenticated");
  const std::vector<AuditEntry> entries = recorder_.entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].principal, "");
  EXPECT_EQ(entries[0].method, "/phalanx.v1.Scheduler/GetGang");
  EXPECT_EQ(entries[0].target, "tgt");
  EXPECT_EQ(entries[0].outcome, absl::StatusCode::kUnauthenticated);
}

TEST_F(GateAdmitTest, RefusesARoleThatMayNotCallTheMethod) {
  const grpc::Status status = Submit("vic-t");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(status.error_message().find("SubmitGang"), std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find("ADMIN or TENANT"), std::string::npos)
      << status.error_message();
  ASSERT_EQ(recorder_.denials().size(), 1u);
  EXPECT_EQ(recorder_.denials()[0], "/phalanx.v1.Scheduler/SubmitGang role");
  ASSERT_EQ(recorder_.entries().size(), 1u);
  EXPECT_EQ(recorder_.entries()[0].principal, "vic");
  EXPECT_EQ(recorder_.entries()[0].outcome,
            absl::StatusCode::kPermissionDenied);
}

TEST_F(GateAdmitTest, RefusesCallsBeyondThePrincipalsBurst) {
  EXPECT_TRUE(Get("slow-t").ok());
  EXPECT_TRUE(Get("slow-t").ok());
  EXPECT_EQ(Get("slow-t").error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Get("alice-t").ok()) << "buckets are per principal";
  ASSERT_EQ(recorder_.denials().size(), 1u);
  EXPECT_EQ(recorder_.denials()[0], "/phalanx.v1.Scheduler/GetGang rate");
}

TEST_F(GateAdmitTest, AFollowerRedirectsWhatItDoesNotServeNamingTheLeader) {
  ReplicaRole role;
  gate_->set_role(&role);
  std::string leader = "unset";
  EXPECT_EQ(Submit("alice-t").error_code(), grpc::StatusCode::UNAVAILABLE);
  role.set_leader_address("10.0.0.7:50051");
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer alice-t");
  v1::SubmitGangRequest request;
  v1::SubmitGangResponse response;
  const grpc::Status status = stub_->SubmitGang(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(status.error_message().find("10.0.0.7:50051"), std::string::npos);
  auto [first, last] =
      context.GetServerTrailingMetadata().equal_range(kLeaderMetadataKey);
  ASSERT_NE(first, last);
  EXPECT_EQ(std::string(first->second.data(), first->second.size()),
            "10.0.0.7:50051");
  // Reads are served by a follower; a redirect is not a refusal.
  EXPECT_TRUE(Get("alice-t", &leader).ok());
  EXPECT_EQ(leader, "");
  EXPECT_TRUE(recorder_.denials().empty());
  // Authentication still comes first.
  EXPECT_EQ(Submit("wrong").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  role.set_leading(true);
  EXPECT_TRUE(Submit("alice-t").ok());
}

TEST(GateRecordTest, RefuseAndAuditRecordWithTheInputCut) {
  Authenticator development;
  Recorder recorder;
  Gate gate(&development, &recorder, &recorder);
  const Caller caller = Caller::Anonymous();
  const absl::Status refused =
      gate.Refuse(caller, rpc::kPutQueue, std::string(500, 'q'), "queue",
                  absl::PermissionDeniedError("no"));
  EXPECT_EQ(refused, absl::PermissionDeniedError("no"));
  gate.Audit(caller, rpc::kPutQueue, "q", absl::InvalidArgumentError("bad"),
             "put q");
  gate.Audit(caller, rpc::kPutQueue, "q", absl::OkStatus(),
             std::string(5000, 's'));
  gate.CountDenied(rpc::kSubmitGang, "node_state");
  const std::vector<AuditEntry> entries = recorder.entries();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].target.size(), 128u);
  EXPECT_EQ(entries[0].outcome, absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(entries[1].summary, "put q: bad");
  EXPECT_EQ(entries[1].outcome, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(entries[2].summary.size(), 1024u);
  EXPECT_EQ(recorder.denials(),
            (std::vector<std::string>{"/phalanx.v1.Admin/PutQueue queue",
                                      "/phalanx.v1.Scheduler/SubmitGang "
                                      "node_state"}));
  EXPECT_FALSE(gate.auth_enabled());
}

// A principal's own rate and burst win over the defaults; a long pause
// refills its bucket up to the burst, not beyond.
TEST(RateLimiterTest, APrincipalsOwnBurstCapsItsRefill) {
  auto principal = std::make_shared<auth::Principal>();
  principal->name = "p";
  principal->requests_per_second = 2;
  principal->request_burst = 2;
  const Caller caller(principal);
  RateLimiter limiter;
  limiter.SetDefaults(/*requests_per_second=*/1000, /*burst=*/1000);
  EXPECT_TRUE(limiter.Allow(caller, kT0));
  EXPECT_TRUE(limiter.Allow(caller, kT0));
  EXPECT_FALSE(limiter.Allow(caller, kT0));
  EXPECT_TRUE(limiter.Allow(caller, kT0 + absl::Milliseconds(600)));
  const absl::Time later = kT0 + absl::Hours(1);
  EXPECT_TRUE(limiter.Allow(caller, later));
  EXPECT_TRUE(limiter.Allow(caller, later));
  EXPECT_FALSE(limiter.Allow(caller, later));
}

}  // namespace
}  // namespace phalanx::server
