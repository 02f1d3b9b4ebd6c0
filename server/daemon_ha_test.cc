// The Daemon in its HA mode, in process, against a real etcd on loopback
// (tests/etcd_cluster.h): it follows until Serve campaigns, then leads;
// a second daemon started after the first shut down takes over its state.
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "phalanx/v1/scheduler.grpc.pb.h"
#include "server/daemon.h"
#include "tests/etcd_cluster.h"

namespace phalanx::server {
namespace {

using ::phalanx::testing::EtcdCluster;

class DaemonHaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Available()) {
      GTEST_SKIP() << EtcdCluster::kEtcdPath
                   << " is absent: install etcd-server to run the etcd tests";
    }
    char pattern[] = "/tmp/phalanx-daemon-ha-XXXXXX";
    root_ = mkdtemp(pattern);
    cluster_ = std::make_unique<EtcdCluster>(1);
    ASSERT_TRUE(cluster_->Start()) << cluster_->logs();
  }
  void TearDown() override {
    cluster_.reset();
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

  // Replica `id`: loopback, ephemeral ports, its own data directory, one
  // node and queue "a" applied when it leads.
  DaemonOptions Options(const std::string& id) {
    DaemonOptions options;
    options.listen = "127.0.0.1:0";
    options.metrics_listen = "127.0.0.1:0";
    options.data_dir = root_ + "/" + id;
    options.fleet_file = root_ + "/fleet.json";
    std::ofstream(options.fleet_file)
        << R"({"nodes":[{"id":"node-0","gpuModel":"H100","gpuCount":8}]})";
    options.queues_file = root_ + "/queues.json";
    std::ofstream(options.queues_file)
        << R"({"queues":[{"name":"a","weight":1}]})";
    options.ha.etcd.endpoints = cluster_->endpoints();
    options.ha.replica_id = id;
    options.ha.advertise_address = options.listen;
    options.ha.prefix = "/phalanx/in-process";
    options.ha.lease_ttl = absl::Seconds(2);
    return options;
  }

  static grpc::Status Submit(const Daemon& daemon, v1::Gang* gang) {
    v1::SubmitGangRequest request;
    request.mutable_spec()->set_queue("a");
    v1::PodSet* pods = request.mutable_spec()->add_pod_sets();
    pods->set_name("workers");
    pods->set_count(1);
    pods->set_gpus(8);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    v1::SubmitGangResponse response;
    auto stub = v1::Scheduler::NewStub(grpc::CreateChannel(
        daemon.grpc_address(), grpc::InsecureChannelCredentials()));
    grpc::Status status = stub->SubmitGang(&context, request, &response);
    if (gang != nullptr) *gang = response.gang();
    return status;
  }

  // Submits until the daemon takes writes: at most 300 tries, 100 ms apart.
  static grpc::Status SubmitOnceLeading(const Daemon& daemon, v1::Gang* gang) {
    grpc::Status status;
    for (int i = 0; i < 300; ++i) {
      status = Submit(daemon, gang);
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE) break;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return status;
  }

  std::string root_;
  std::unique_ptr<EtcdCluster> cluster_;
};

TEST_F(DaemonHaTest, FollowsUntilServeLeadsThenHandsOverAtShutdown) {
  std::string id;
  {
    Daemon first;
    ASSERT_TRUE(first.Start(Options("r1")).ok());
    // Not campaigning yet: a follower, which refuses writes.
    EXPECT_EQ(Submit(first, nullptr).error_code(),
              grpc::StatusCode::UNAVAILABLE);
    absl::Status served;
    std::thread serving([&] { served = first.Serve(); });
    v1::Gang gang;
    const grpc::Status submitted = SubmitOnceLeading(first, &gang);
    EXPECT_TRUE(submitted.ok()) << submitted.error_message();
    id = gang.id();
    first.RequestStop();
    serving.join();
    EXPECT_TRUE(served.ok()) << served;
    first.Shutdown();
  }
  ASSERT_FALSE(id.empty());
  Daemon second;
  ASSERT_TRUE(second.Start(Options("r2")).ok());
  absl::Status served;
  std::thread serving([&] { served = second.Serve(); });
  v1::Gang next;
  const grpc::Status submitted = SubmitOnceLeading(second, &next);
  EXPECT_TRUE(submitted.ok()) << submitted.error_message();
  // The second replica leads with the first one's state: its gang holds
  // the only node, so the new one waits.
  EXPECT_NE(next.id(), id);
  EXPECT_EQ(next.state(), v1::GANG_STATE_PENDING);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  v1::GetGangRequest request;
  request.set_gang_id(id);
  v1::GetGangResponse response;
  const grpc::Status read =
      v1::Scheduler::NewStub(
          grpc::CreateChannel(second.grpc_address(),
                              grpc::InsecureChannelCredentials()))
          ->GetGang(&context, request, &response);
  EXPECT_TRUE(read.ok()) << read.error_message();
  EXPECT_EQ(response.gang().state(), v1::GANG_STATE_ADMITTED);
  second.RequestStop();
  serving.join();
  EXPECT_TRUE(served.ok()) << served;
}

}  // namespace
}  // namespace phalanx::server
