// The HA mode end to end (docs/ha.md): real phalanxd replicas against a
// real 3-member etcd cluster on loopback. One leads; when it dies or shuts
// down, a follower takes over with every acknowledged write. (Followers'
// reads, redirects and failures: ha_follow_test.cc.) Skipped only when
// /usr/bin/etcd is absent.
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"
#include "tests/etcd_cluster.h"
#include "tests/ha_writers.h"
#include "tests/runtime_changes.h"

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

  // A replica (not started) with a lease of `lease_ttl`.
  std::unique_ptr<DaemonProcess> Replica(const std::string& id,
                                         const std::string& lease_ttl = "2s") {
    return StartDemoDaemon(
        {"--etcd-endpoints=" + absl::StrJoin(cluster_->endpoints(), ","),
         "--replica-id=" + id, "--etcd-prefix=/phalanx/it",
         "--etcd-lease-ttl=" + lease_ttl});
  }

  std::unique_ptr<EtcdCluster> cluster_;
};

TEST_F(HaTest, AFollowerTakesOverWithEveryAcknowledgedWrite) {
  auto a = Replica("1");
  ASSERT_TRUE(a->Start()) << a->output();
  ASSERT_TRUE(Eventually([&] {
    return HealthStatus(a->channel(), "phalanx.v1.Leader") == 1;
  })) << a->output();
  EXPECT_EQ(HealthStatus(a->channel(), ""), 1);
  // No request may come near the log's batch bound.
  EXPECT_NE(a->output().find("--max-message-bytes capped at"),
            std::string::npos)
      << a->output();
  auto stub = a->Scheduler();
  const v1::Gang gang = SubmitOk(*stub, SubmitRequest("a", 2, 8, "rack"));

  // b follows: it serves, but not as the leader.
  auto b = Replica("2");
  ASSERT_TRUE(b->Start()) << b->output();
  EXPECT_EQ(HealthStatus(b->channel(), "phalanx.v1.Leader"), 2);
  a->Kill9();
  ASSERT_TRUE(Eventually([&] {
    return HealthStatus(b->channel(), "phalanx.v1.Leader") == 1;
  })) << b->output();
  b->ReadOutput();
  EXPECT_NE(b->output().find("leading /phalanx/it as 2"), std::string::npos)
      << b->output();
  auto b_stub = b->Scheduler();
  const v1::Gang recovered = GetOk(*b_stub, gang.id());
  EXPECT_EQ(recovered.state(), gang.state());
  EXPECT_EQ(recovered.placement_size(), gang.placement_size());
  const v1::Gang next = SubmitOk(*b_stub, SubmitRequest("a", 1, 8));
  EXPECT_NE(next.id(), gang.id());  // the id sequence went on
  StopAndCheckStores({a.get(), b.get()});
}

// A clean stop revokes the leader's lease: with a 10 s lease, the other
// replica must lead within half of it (the lease expiring would take all
// of it); the handover time is printed.
TEST_F(HaTest, ACleanShutdownHandsOverAtOnce) {
  auto a = Replica("1", "10s");
  ASSERT_TRUE(a->Start()) << a->output();
  ASSERT_TRUE(Eventually([&] {
    return HealthStatus(a->channel(), "phalanx.v1.Leader") == 1;
  })) << a->output();
  auto b = Replica("2", "10s");
  ASSERT_TRUE(b->Start()) << b->output();
  const absl::Time stop = absl::Now();
  EXPECT_EQ(a->Terminate(), 0) << a->output();
  const absl::Duration stopped = absl::Now() - stop;
  // A revoke that did not go through would keep it retrying until the
  // lease could expire (10 s).
  EXPECT_LT(stopped, absl::Seconds(5));
  ASSERT_TRUE(Eventually(
      [&] { return HealthStatus(b->channel(), "phalanx.v1.Leader") == 1; },
      100))
      << b->output();
  std::printf(
      "clean stop: the leader exited %.3f s after SIGTERM, the other "
      "replica led %.3f s after SIGTERM (lease TTL 10 s)\n",
      absl::ToDoubleSeconds(stopped),
      absl::ToDoubleSeconds(absl::Now() - stop));
  b->ReadOutput();
  EXPECT_NE(b->output().find("leading /phalanx/it as 2"), std::string::npos)
      << b->output();
  auto b_stub = b->Scheduler();
  SubmitOk(*b_stub, SubmitRequest("a", 1, 8));
  StopAndCheckStores({a.get(), b.get()});
}

// Kills `leader` with SIGKILL and waits (bounded) until `next` leads;
// reads what `next` printed meanwhile. Returns whether it leads.
bool FailOver(DaemonProcess& leader, DaemonProcess& next) {
  leader.Kill9();
  const bool leads = Eventually(
      [&] { return HealthStatus(next.channel(), "phalanx.v1.Leader") == 1; });
  next.ReadOutput();
  return leads;
}

constexpr char kQueuesUnchanged[] = "queues.json: unchanged since it was last";

// Each replica has its own copy of the demo files; the same text, so the
// same hashes.
TEST_F(HaTest, AFailoverKeepsRunTimeChangesAndAppliesAnEditedFileOnce) {
  auto a = Replica("1");
  ASSERT_TRUE(a->Start()) << a->output();
  ASSERT_TRUE(Eventually([&] {
    return HealthStatus(a->channel(), "phalanx.v1.Leader") == 1;
  })) << a->output();
  auto b = Replica("2");
  ASSERT_TRUE(b->Start()) << b->output();
  ChangeAtRunTime(*a);
  ASSERT_EQ(ReadOperatorFields(*a), ChangedFields());

  ASSERT_TRUE(FailOver(*a, *b)) << b->output();
  EXPECT_EQ(ReadOperatorFields(*b), ChangedFields()) << b->output();
  EXPECT_NE(b->output().find(kQueuesUnchanged), std::string::npos)
      << b->output();

  // The queues file edited on every replica; a rejoins and takes over.
  const std::string edited = R"({"queues":[{"name":"a","weight":5}]})";
  a->WriteFile("queues.json", edited);
  b->WriteFile("queues.json", edited);
  ASSERT_TRUE(a->Start()) << a->output();
  ASSERT_TRUE(FailOver(*b, *a)) << a->output();
  EXPECT_NE(a->output().find("queues.json: applied"), std::string::npos)
      << a->output();
  OperatorFields expected = ChangedFields();
  expected.queue_a_weight = 5;
  expected.queue_a_held = false;
  EXPECT_EQ(ReadOperatorFields(*a), expected);

  // Held again; the next failover applies nothing.
  ChangeAtRunTime(*a);
  ASSERT_TRUE(b->Start()) << b->output();
  ASSERT_TRUE(FailOver(*a, *b)) << b->output();
  EXPECT_EQ(ReadOperatorFields(*b), ChangedFields()) << b->output();
  EXPECT_NE(b->output().find(kQueuesUnchanged), std::string::npos)
      << b->output();
  StopAndCheckStores({a.get(), b.get()});
}

TEST_F(HaTest, HaModeFlagsAreChecked) {
  auto daemon = StartDemoDaemon(
      {"--etcd-endpoints=" + cluster_->endpoint(0), "--replica-id=has space"});
  EXPECT_FALSE(daemon->Start());
  EXPECT_NE(daemon->output().find("--replica-id"), std::string::npos)
      << daemon->output();
  auto tiny = StartDemoDaemon({"--etcd-endpoints=" + cluster_->endpoint(0),
                               "--replica-id=r", "--etcd-max-batch-bytes=100"});
  EXPECT_FALSE(tiny->Start());
  EXPECT_NE(tiny->output().find("--etcd-max-batch-bytes"), std::string::npos)
      << tiny->output();
}

}  // namespace
}  // namespace phalanx::testing
