// The HA mode end to end (docs/ha.md): real phalanxd replicas against a
// real 3-member etcd cluster on loopback. Active/standby: one leads and
// serves; when it dies, the standby takes over with every acknowledged
// write. Skipped only when /usr/bin/etcd is absent.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"
#include "tests/etcd_cluster.h"

namespace phalanx::testing {
namespace {

class HaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Available()) {
      GTEST_SKIP() << EtcdCluster::kEtcdPath
                   << " is absent: install etcd-server to run the HA tests";
    }
    cluster_ = std::make_unique<EtcdCluster>(3);
    ASSERT_TRUE(cluster_->Start()) << cluster_->logs();
  }

  std::unique_ptr<DaemonProcess> Replica(const std::string& id) {
    return StartDemoDaemon(
        {"--etcd-endpoints=" + absl::StrJoin(cluster_->endpoints(), ","),
         "--replica-id=" + id, "--advertise-address=127.0.0.1:" + id,
         "--etcd-prefix=/phalanx/it", "--etcd-lease-ttl=2s"});
  }

  std::unique_ptr<EtcdCluster> cluster_;
};

// grpc.health.v1.Health/Check of `service` by hand (no health stubs here):
// returns the status enum (1 = SERVING), or -code on an RPC error.
int Health(const std::shared_ptr<grpc::Channel>& channel,
           const std::string& service) {
  std::string request_bytes = "\x0a";
  request_bytes.push_back(static_cast<char>(service.size()));
  request_bytes += service;
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  grpc::GenericStub stub(channel);
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                 &request, &response, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return -static_cast<int>(status.error_code());
  std::vector<grpc::Slice> slices;
  (void)response.Dump(&slices);
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : 0;
}

TEST_F(HaTest, TheStandbyTakesOverWithEveryAcknowledgedWrite) {
  auto a = Replica("1");
  ASSERT_TRUE(a->Start()) << a->output();
  EXPECT_EQ(Health(a->channel(), "phalanx.v1.Leader"), 1);
  EXPECT_EQ(Health(a->channel(), ""), 1);
  // No request may come near the log's batch bound.
  EXPECT_NE(a->output().find("--max-message-bytes capped at"),
            std::string::npos)
      << a->output();
  auto stub = a->Scheduler();
  const v1::Gang gang = SubmitOk(*stub, SubmitRequest("a", 2, 8, "rack"));

  // b stands by (it prints its addresses only once it leads).
  auto b = Replica("2");
  bool b_started = false;
  std::thread start_b([&] { b_started = b->Start(); });
  a->Kill9();
  start_b.join();
  ASSERT_TRUE(b_started) << b->output();
  EXPECT_NE(b->output().find("leading /phalanx/it as 2"), std::string::npos)
      << b->output();
  EXPECT_EQ(Health(b->channel(), "phalanx.v1.Leader"), 1);
  auto b_stub = b->Scheduler();
  const v1::Gang recovered = GetOk(*b_stub, gang.id());
  EXPECT_EQ(recovered.state(), gang.state());
  EXPECT_EQ(recovered.placement_size(), gang.placement_size());
  const v1::Gang next = SubmitOk(*b_stub, SubmitRequest("a", 1, 8));
  EXPECT_NE(next.id(), gang.id());  // the id sequence went on
}

TEST_F(HaTest, ACleanShutdownHandsOverAtOnce) {
  auto a = Replica("1");
  ASSERT_TRUE(a->Start()) << a->output();
  auto b = Replica("2");
  bool b_started = false;
  std::thread start_b([&] { b_started = b->Start(); });
  EXPECT_EQ(a->Terminate(), 0) << a->output();
  start_b.join();
  ASSERT_TRUE(b_started) << b->output();
  EXPECT_NE(b->output().find("leading /phalanx/it as 2"), std::string::npos)
      << b->output();
  auto b_stub = b->Scheduler();
  SubmitOk(*b_stub, SubmitRequest("a", 1, 8));
}

TEST_F(HaTest, HaModeFlagsAreChecked) {
  auto daemon = StartDemoDaemon(
      {"--etcd-endpoints=" + cluster_->endpoint(0), "--replica-id=has space"});
  EXPECT_FALSE(daemon->Start());
  EXPECT_NE(daemon->output().find("--replica-id"), std::string::npos)
      << daemon->output();
}

}  // namespace
}  // namespace phalanx::testing
