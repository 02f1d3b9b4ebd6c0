// The HA mode with etcd over its space quota (docs/ha.md, "etcd over its
// quota"): a real 3-member etcd cluster on loopback with a small
// --quota-backend-bytes, a leader and a follower replica, two writers. A
// key rewritten until etcd raises its NOSPACE alarm stands for history
// that outgrew the quota. While etcd refuses writes, the leader refuses
// submits UNAVAILABLE naming etcd's quota and keeps serving reads (the
// loop's reads from its last durable state), the follower keeps serving,
// health stays SERVING and phalanx_storage_writes_refused is 1; once the
// operator compacts, defragments and disarms the alarm, writes resume by
// themselves: every acknowledged submit there once, no GPU held twice.
// Skipped only when /usr/bin/etcd is absent. Every wait is bounded.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "storage/etcd/etcd_client.h"
#include "tests/daemon.h"
#include "tests/etcd_cluster.h"
#include "tests/etcd_fixture.h"
#include "tests/ha_writers.h"

namespace phalanx::testing {
namespace {

using google::protobuf::util::MessageDifferencer;

constexpr int kServing = 1;
const char kLeader[] = "phalanx.v1.Leader";
// Small enough to fill in a second, large enough for the demo fleet's
// state and a few hundred batches.
constexpr int64_t kQuotaBytes = 4 << 20;
constexpr size_t kFillerValueBytes = 256 << 10;
// Whole sample lines of /metrics.
constexpr char kRefusedGauge[] = "\nphalanx_storage_writes_refused 1\n";
constexpr char kAcceptedGauge[] = "\nphalanx_storage_writes_refused 0\n";

// Whether replica `replica`'s /metrics shows `line`, waiting up to 20 s.
bool AwaitMetric(const DaemonProcess& replica, const std::string& line) {
  return Eventually([&] {
    return absl::StrContains(HttpGet(replica.metrics_port(), "/metrics"), line);
  });
}

// SubmitGang of one 1-GPU gang in queue "a" with `request_id`, 5 s
// deadline.
grpc::Status Submit(v1::Scheduler::Stub& stub, const std::string& request_id) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::SubmitGangResponse response;
  return stub.SubmitGang(&context, SubmitRequest("a", 1, 1, "", request_id),
                         &response);
}

// The cluster has a small quota; client_ fills it.
class HaNoSpaceTest : public EtcdClusterTest {
 protected:
  std::vector<std::string> EtcdFlags() const override {
    return {absl::StrCat("--quota-backend-bytes=", kQuotaBytes)};
  }

  // A replica (started) on the cluster with a 2 s lease.
  std::unique_ptr<DaemonProcess> StartReplica(const std::string& id) {
    auto replica = StartDemoDaemon(
        {"--etcd-endpoints=" + absl::StrJoin(cluster_->endpoints(), ","),
         "--replica-id=" + id, "--etcd-prefix=/phalanx/nospace",
         "--etcd-lease-ttl=2s"});
    EXPECT_TRUE(replica->Start()) << replica->output();
    return replica;
  }

  // Rewrites one key outside phalanxd's prefix with a large value until
  // etcd refuses a write (at most 200 puts). Returns that refusal.
  absl::Status FillEtcd() {
    storage::etcd::epb::PutRequest put;
    put.set_key("/other-tenant/history");
    put.set_value(std::string(kFillerValueBytes, 'x'));
    for (int i = 0; i < 200; ++i) {
      if (absl::StatusOr<storage::etcd::epb::PutResponse> done =
              client_->Put(put);
          !done.ok()) {
        return done.status();
      }
    }
    return absl::OkStatus();
  }
};

TEST_F(HaNoSpaceTest, WritesAreRefusedOverEtcdsQuotaAndResumeOnceFreed) {
  std::unique_ptr<DaemonProcess> leader = StartReplica("r0");
  ASSERT_TRUE(Eventually([&] {
    return HealthStatus(leader->channel(), kLeader) == kServing;
  })) << leader->output();
  std::unique_ptr<DaemonProcess> follower = StartReplica("r1");
  auto leader_stub = leader->Scheduler();
  auto follower_stub = follower->Scheduler();

  Writers writers({leader.get(), follower.get()}, /*per_writer=*/80,
                  /*stop_on_error=*/false, absl::Milliseconds(100));
  writers.Start();
  ASSERT_TRUE(Eventually([&] { return writers.acknowledged() >= 10; }));

  // 1. etcd over its quota: NOSPACE raised, the leader's next commit
  // refused and held.
  const absl::Status filled = FillEtcd();
  ASSERT_EQ(filled.code(), absl::StatusCode::kResourceExhausted) << filled;
  EXPECT_TRUE(absl::StrContains(filled.message(), "database space exceeded"))
      << filled;
  // Raised by each member that found itself over the quota.
  EXPECT_THAT(cluster_->Alarms(),
              ::testing::AllOf(::testing::Not(::testing::IsEmpty()),
                               ::testing::Each("NOSPACE")));
  ASSERT_TRUE(AwaitMetric(*leader, kRefusedGauge))
      << leader->output() << cluster_->logs();
  const absl::Time refused_at = absl::Now();

  // 2. Writes refused with the reason; the follower sends writers to the
  // leader as before.
  const grpc::Status refused = Submit(*leader_stub, "while-full");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(absl::StrContains(refused.error_message(),
                                "writes refused: commit: no space left in "
                                "etcd: it is over its space quota "
                                "(--quota-backend-bytes, NOSPACE alarm"))
      << refused.error_message();
  EXPECT_TRUE(
      absl::StrContains(refused.error_message(), "database space exceeded"))
      << refused.error_message();
  EXPECT_EQ(Submit(*follower_stub, "while-full-follower").error_code(),
            grpc::StatusCode::UNAVAILABLE);

  // 3. Reads go on: gangs on both replicas, the loop's reads on the leader
  // (from its last durable state), health. The follower reads at the
  // leader's revision, or one batch past it: an append whose answer was
  // lost (a timeout) and whose retry etcd refused is in the log, though
  // the leader has not acknowledged it yet (it will, when its retry finds
  // it there).
  const v1::ListGangsResponse led = ListAll(*leader_stub);
  ASSERT_GT(led.gangs_size(), 0);
  EXPECT_EQ(GetOk(*leader_stub, led.gangs(0).id()).id(), led.gangs(0).id());
  ASSERT_TRUE(Eventually([&] {
    v1::ListGangsRequest request;
    request.set_page_size(1);
    v1::ListGangsResponse response;
    grpc::ClientContext context;
    return follower_stub->ListGangs(&context, request, &response).ok() &&
           response.revision() >= led.revision();
  }));
  EXPECT_EQ(GetOk(*follower_stub, led.gangs(0).id()).id(), led.gangs(0).id());
  {
    auto admin = leader->Admin();
    grpc::ClientContext context;
    v1::ListQueuesResponse queues;
    const grpc::Status listed = admin->ListQueues(&context, {}, &queues);
    EXPECT_TRUE(listed.ok()) << listed.error_message();
    EXPECT_EQ(queues.revision(), led.revision());
  }
  EXPECT_EQ(HealthStatus(leader->channel(), ""), kServing);
  EXPECT_EQ(HealthStatus(leader->channel(), kLeader), kServing);
  EXPECT_EQ(HealthStatus(follower->channel(), ""), kServing);
  EXPECT_TRUE(absl::StrContains(HttpGet(follower->metrics_port(), "/metrics"),
                                kAcceptedGauge));  // a follower writes nothing

  // 4. The operator frees space; the held batch commits by itself.
  ASSERT_EQ(cluster_->ReclaimSpace(), "") << cluster_->logs();
  EXPECT_EQ(cluster_->Alarms(), std::vector<std::string>{});
  ASSERT_TRUE(AwaitMetric(*leader, kAcceptedGauge)) << leader->output();
  std::printf("writes refused for %s (until space was reclaimed)\n",
              absl::FormatDuration(absl::Now() - refused_at).c_str());
  ASSERT_TRUE(Eventually([&] {
    return Submit(*leader_stub, "after-reclaim").ok();
  })) << leader->output();

  // 5. Nothing lost, nothing twice; the follower follows.
  writers.Join();
  const v1::ListGangsResponse after = ListAll(*leader_stub);
  writers.Check(after);
  writers.CheckErrorsAreRetryable();
  EXPECT_GT(CheckNoGpuTwice(after), 0);
  ASSERT_TRUE(Eventually(
      [&] { return ListAll(*follower_stub).revision() >= after.revision(); }));
  EXPECT_TRUE(MessageDifferencer::Equals(WithoutPlans(ListAll(*follower_stub)),
                                         WithoutPlans(after)));
  EXPECT_EQ(leader->WaitForExit(absl::ZeroDuration()), -1)
      << "the leader exited: " << leader->output();
  StopAndCheckStores({leader.get(), follower.get()});
}

}  // namespace
}  // namespace phalanx::testing
