// The Daemon in process: a real RocksDB in a temporary directory, real gRPC
// on ephemeral loopback ports, the real generated stubs.
#include "server/daemon.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "phalanx/v1/scheduler.grpc.pb.h"
#include "server/auth.h"
#include "server/daemon_options.h"
#include "storage/sync/mutex.h"

ABSL_DECLARE_FLAG(std::string, listen);
ABSL_DECLARE_FLAG(absl::Duration, watch_sweep_interval);
ABSL_DECLARE_FLAG(std::vector<std::string>, etcd_endpoints);
ABSL_DECLARE_FLAG(std::string, replica_id);

namespace phalanx::server {
namespace {

constexpr char kFleetJson[] =
    R"({"nodes":[{"id":"node-0","gpuModel":"H100","gpuCount":8},)"
    R"({"id":"node-1","gpuModel":"H100","gpuCount":8}]})";
constexpr char kQueuesJson[] = R"({"queues":[{"name":"a","weight":1}]})";

class DaemonTest : public ::testing::Test {
 protected:
  DaemonTest() {
    char pattern[] = "/tmp/phalanx-daemon-XXXXXX";
    root_ = mkdtemp(pattern);
  }
  ~DaemonTest() override { std::filesystem::remove_all(root_); }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = root_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  // Loopback, ephemeral ports, a data directory under the test's root, the
  // two-node fleet and queue "a".
  DaemonOptions Options(const std::string& data = "data") {
    DaemonOptions options;
    options.listen = "127.0.0.1:0";
    options.metrics_listen = "127.0.0.1:0";
    options.data_dir = root_ + "/" + data;
    options.fleet_file = WriteFile("fleet.json", kFleetJson);
    options.queues_file = WriteFile("queues.json", kQueuesJson);
    return options;
  }

  static std::unique_ptr<v1::Scheduler::Stub> Stub(const Daemon& daemon) {
    return v1::Scheduler::NewStub(grpc::CreateChannel(
        daemon.grpc_address(), grpc::InsecureChannelCredentials()));
  }

  static v1::Gang Submit(v1::Scheduler::Stub& stub, int gpus) {
    v1::SubmitGangRequest request;
    request.mutable_spec()->set_queue("a");
    v1::PodSet* pods = request.mutable_spec()->add_pod_sets();
    pods->set_name("workers");
    pods->set_count(1);
    pods->set_gpus(gpus);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    v1::SubmitGangResponse response;
    const grpc::Status status = stub.SubmitGang(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.gang();
  }

  static grpc::Status Get(v1::Scheduler::Stub& stub, const std::string& id,
                          v1::Gang& gang) {
    v1::GetGangRequest request;
    request.set_gang_id(id);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    v1::GetGangResponse response;
    grpc::Status status = stub.GetGang(&context, request, &response);
    gang = response.gang();
    return status;
  }

  // An --auth file with one admin whose bearer token is `token`.
  std::string WriteAuth(const std::string& token) {
    return WriteFile("auth.json",
                     R"({"principals":[{"name":"ops","tokenSha256":")" +
                         HexOf(Sha256Of(token)) +
                         R"(","roles":["ROLE_ADMIN"]}]})");
  }

  // GetGang of an unknown gang with `token`: NOT_FOUND once authenticated.
  static grpc::StatusCode GetWithToken(const Daemon& daemon,
                                       const std::string& token) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    context.AddMetadata("authorization", "Bearer " + token);
    v1::GetGangRequest request;
    request.set_gang_id("g-404");
    v1::GetGangResponse response;
    return Stub(daemon)->GetGang(&context, request, &response).error_code();
  }

  // The status of a reflection stream opened and half-closed at once:
  // UNIMPLEMENTED when the daemon does not serve reflection.
  static grpc::StatusCode Reflect(const Daemon& daemon) {
    class Call
        : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
     public:
      void OnDone(const grpc::Status& status) override {
        code = status.error_code();
        done.Notify();
      }
      grpc::StatusCode code = grpc::StatusCode::DEADLINE_EXCEEDED;
      Notification done;
    };
    grpc::GenericStub stub(grpc::CreateChannel(
        daemon.grpc_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    Call call;
    stub.PrepareBidiStreamingCall(
        &context,
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        grpc::StubOptions(), &call);
    call.StartWritesDone();
    call.StartCall();
    call.done.WaitForNotificationWithTimeout(absl::Seconds(60));
    return call.code;
  }

  std::string root_;
};

TEST_F(DaemonTest, ServesSubmitAndGetOnEphemeralLoopbackPorts) {
  Daemon daemon;
  ASSERT_TRUE(daemon.Start(Options()).ok());
  EXPECT_GT(daemon.grpc_port(), 0);
  EXPECT_GT(daemon.metrics_port(), 0);
  EXPECT_EQ(daemon.grpc_address(),
            "127.0.0.1:" + std::to_string(daemon.grpc_port()));
  auto stub = Stub(daemon);
  const v1::Gang submitted = Submit(*stub, 8);
  EXPECT_EQ(submitted.state(), v1::GANG_STATE_ADMITTED) << submitted.reason();
  v1::Gang read;
  ASSERT_TRUE(Get(*stub, submitted.id(), read).ok());
  EXPECT_EQ(read.id(), submitted.id());
  EXPECT_EQ(read.state(), v1::GANG_STATE_ADMITTED);
  EXPECT_EQ(read.placement_size(), 1);
  daemon.Shutdown();
  EXPECT_EQ(daemon.grpc_port(), 0);
}

TEST_F(DaemonTest, RestartOnTheSameDirectoryKeepsTheGangs) {
  DaemonOptions options = Options();
  std::string id;
  {
    Daemon daemon;
    ASSERT_TRUE(daemon.Start(options).ok());
    id = Submit(*Stub(daemon), 8).id();
    ASSERT_FALSE(id.empty());
  }  // the destructor shuts down
  Daemon daemon;
  for (int start = 0; start < 2; ++start) {
    ASSERT_TRUE(daemon.Start(options).ok()) << "start " << start;
    auto stub = Stub(daemon);
    v1::Gang read;
    ASSERT_TRUE(Get(*stub, id, read).ok()) << "start " << start;
    EXPECT_EQ(read.state(), v1::GANG_STATE_ADMITTED);
    daemon.Shutdown();
  }
}

TEST_F(DaemonTest, TwoDaemonsServeSideBySide) {
  Daemon first, second;
  ASSERT_TRUE(first.Start(Options("one")).ok());
  ASSERT_TRUE(second.Start(Options("two")).ok());
  EXPECT_NE(first.grpc_port(), second.grpc_port());
  const std::string id = Submit(*Stub(first), 8).id();
  v1::Gang read;
  EXPECT_TRUE(Get(*Stub(first), id, read).ok());
  EXPECT_EQ(Get(*Stub(second), id, read).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(DaemonTest, ServeReturnsOnceStopIsRequested) {
  Daemon daemon;
  EXPECT_EQ(daemon.Serve().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(daemon.Start(Options()).ok());
  daemon.RequestStop();
  EXPECT_TRUE(daemon.Serve().ok());
}

TEST_F(DaemonTest, StartingTwiceFails) {
  Daemon daemon;
  ASSERT_TRUE(daemon.Start(Options()).ok());
  EXPECT_EQ(daemon.Start(Options("other")).code(),
            absl::StatusCode::kFailedPrecondition);
}

// Each bad option fails Start with a message naming the flag; the same
// daemon then starts with good ones.
TEST_F(DaemonTest, BadOptionsAreRejectedNamingTheFlag) {
  struct Case {
    const char* name;
    void (*spoil)(DaemonOptions&);
    absl::StatusCode code;
    const char* flag;
  };
  const Case cases[] = {
      {"sweep quiet",
       [](DaemonOptions& o) { o.watch_flush.quiet = absl::Seconds(11); },
       absl::StatusCode::kInvalidArgument, "--watch-sweep-quiet"},
      {"sweep interval",
       [](DaemonOptions& o) { o.watch_flush.interval = -absl::Seconds(1); },
       absl::StatusCode::kInvalidArgument, "--watch-sweep-interval"},
      {"listen", [](DaemonOptions& o) { o.listen = "0.0.0.0:0"; },
       absl::StatusCode::kFailedPrecondition, "--listen"},
      {"metrics", [](DaemonOptions& o) { o.metrics_listen = "0.0.0.0:0"; },
       absl::StatusCode::kFailedPrecondition, "--metrics-listen"},
      {"client ca", [](DaemonOptions& o) { o.tls.client_ca = "/ca.pem"; },
       absl::StatusCode::kInvalidArgument, "--tls-client-ca"},
      {"replica id",
       [](DaemonOptions& o) {
         o.ha.etcd.endpoints = {"http://127.0.0.1:1"};
         o.ha.replica_id = "has space";
         o.ha.advertise_address = o.listen;
       },
       absl::StatusCode::kInvalidArgument, "--replica-id"},
      {"lease ttl",
       [](DaemonOptions& o) {
         o.ha.etcd.endpoints = {"http://127.0.0.1:1"};
         o.ha.replica_id = "r";
         o.ha.advertise_address = o.listen;
         o.ha.lease_ttl = absl::Seconds(1);
       },
       absl::StatusCode::kInvalidArgument, "--etcd-lease-ttl"},
  };
  Daemon daemon;
  for (const Case& c : cases) {
    DaemonOptions options = Options();
    c.spoil(options);
    const absl::Status status = daemon.Start(options);
    EXPECT_EQ(status.code(), c.code) << c.name << ": " << status;
    EXPECT_TRUE(absl::StrContains(status.message(), c.flag))
        << c.name << ": " << status;
    EXPECT_EQ(daemon.grpc_port(), 0) << c.name;
  }
  EXPECT_TRUE(daemon.Start(Options()).ok());
}

TEST_F(DaemonTest, UnreadableFilesFailStartNamingThem) {
  Daemon daemon;
  DaemonOptions options = Options();
  options.auth_file = root_ + "/missing-auth.json";
  absl::Status status = daemon.Start(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "missing-auth.json"));
  options = Options();
  options.fleet_file = WriteFile("broken.json", "{not json");
  status = daemon.Start(options);
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(absl::StrContains(status.message(), "broken.json")) << status;
  EXPECT_TRUE(daemon.Start(Options()).ok());
}

TEST_F(DaemonTest, AnAddressItCannotBindFailsStartAndFreesTheStore) {
  DaemonOptions options = Options();
  options.listen = "192.0.2.1:0";  // TEST-NET-1: no address of this host
  options.insecure = true;
  Daemon daemon;
  const absl::Status status = daemon.Start(options);
  EXPECT_EQ(status.message(), "cannot listen on 192.0.2.1:0") << status;
  // The store of the failed start is closed: it opens again.
  EXPECT_TRUE(daemon.Start(Options()).ok());
}

// Reflection answers anyone: served in development mode only, whatever
// daemon of the process ran before.
TEST_F(DaemonTest, ServesReflectionWithoutAuthOnly) {
  Daemon development;
  ASSERT_TRUE(development.Start(Options("one")).ok());
  EXPECT_EQ(Reflect(development), grpc::StatusCode::OK);
  DaemonOptions with_auth = Options("two");
  with_auth.auth_file = WriteAuth("t1");
  Daemon secured;
  ASSERT_TRUE(secured.Start(with_auth).ok());
  EXPECT_EQ(Reflect(secured), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(Reflect(development), grpc::StatusCode::OK);
}

TEST_F(DaemonTest, ReloadAuthReplacesThePrincipals) {
  DaemonOptions options = Options();
  options.auth_file = WriteAuth("old-token");
  Daemon daemon;
  ASSERT_TRUE(daemon.Start(options).ok());
  EXPECT_EQ(GetWithToken(daemon, "old-token"), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(GetWithToken(daemon, "new-token"),
            grpc::StatusCode::UNAUTHENTICATED);
  WriteAuth("new-token");
  daemon.ReloadAuth();
  EXPECT_EQ(GetWithToken(daemon, "new-token"), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(GetWithToken(daemon, "old-token"),
            grpc::StatusCode::UNAUTHENTICATED);
  // A file that does not parse keeps the principals.
  WriteFile("auth.json", "{broken");
  daemon.ReloadAuth();
  EXPECT_EQ(GetWithToken(daemon, "new-token"), grpc::StatusCode::NOT_FOUND);
}

// The flags give DaemonOptions' defaults, --advertise-address defaults to
// --listen, and a bad flag is refused with its name.
TEST(DaemonOptionsFromFlagsTest, ReadsAndChecksTheFlags) {
  absl::FlagSaver saver;
  absl::StatusOr<DaemonOptions> defaults = DaemonOptionsFromFlags();
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  const DaemonOptions plain;
  EXPECT_EQ(defaults->listen, plain.listen);
  EXPECT_EQ(defaults->data_dir, plain.data_dir);
  EXPECT_EQ(defaults->metrics_listen, plain.metrics_listen);
  EXPECT_EQ(defaults->max_message_bytes, plain.max_message_bytes);
  EXPECT_EQ(defaults->watch_flush.quiet, plain.watch_flush.quiet);
  EXPECT_EQ(defaults->watch_flush.interval, plain.watch_flush.interval);
  EXPECT_EQ(defaults->ha.prefix, plain.ha.prefix);
  EXPECT_EQ(defaults->ha.lease_ttl, plain.ha.lease_ttl);
  EXPECT_EQ(defaults->ha.max_batch_bytes, plain.ha.max_batch_bytes);
  EXPECT_FALSE(defaults->ha_mode());

  absl::SetFlag(&FLAGS_listen, "127.0.0.1:7000");
  absl::SetFlag(&FLAGS_etcd_endpoints, {"http://127.0.0.1:2379"});
  absl::SetFlag(&FLAGS_replica_id, "r1");
  absl::StatusOr<DaemonOptions> ha = DaemonOptionsFromFlags();
  ASSERT_TRUE(ha.ok()) << ha.status();
  EXPECT_TRUE(ha->ha_mode());
  EXPECT_EQ(ha->ha.advertise_address, "127.0.0.1:7000");

  absl::SetFlag(&FLAGS_watch_sweep_interval, absl::Seconds(11));
  absl::StatusOr<DaemonOptions> bad = DaemonOptionsFromFlags();
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "--watch-sweep-interval: must be in 0s..10s, not 11s");
}

}  // namespace
}  // namespace phalanx::server
