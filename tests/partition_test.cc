// Network partitions in the HA mode (docs/ha.md, "Partitions"): 3 etcd
// members and 3 phalanxd replicas, each in its own network namespace on a
// bridge (tests/network_lab.h); the test process is the clients' side.
// Links are cut and healed while two writers submit and cancel throughout.
// After every fault heals: every acknowledged write is there once, no GPU
// is held twice, every client error was a retryable code, and every
// replica lists exactly what the leader lists. Each case prints the time
// to a new leader and the longest write gap the writers saw.
//
// Skipped when /usr/bin/etcd is absent or network namespaces cannot be
// made (not root, or no CAP_SYS_ADMIN). Every wait is bounded.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"
#include "tests/etcd_cluster.h"
#include "tests/ha_writers.h"
#include "tests/network_lab.h"

namespace phalanx::testing {
namespace {

constexpr int kServing = 1;
const char kLeader[] = "phalanx.v1.Leader";
constexpr int kMembers = 3, kReplicas = 3;
// The writers pause this long after each submit: 150 submits each last
// about 10 s, longer than every fault below.
constexpr absl::Duration kPause = absl::Milliseconds(50);
// How long a cut that should not cause a failover lasts: three lease TTLs.
constexpr absl::Duration kCut = absl::Seconds(6);

// Moves the test process into a network of its own before any test (and
// any gRPC thread) starts.
class PrivateNetwork : public ::testing::Environment {
 public:
  void SetUp() override {
    if (!NetworkLab::EnterPrivateNetwork(&why_)) {
      std::printf("partition tests will skip: %s\n", why_.c_str());
    }
  }
  static const std::string& why() { return why_; }

 private:
  static inline std::string why_;
};
[[maybe_unused]] ::testing::Environment* const kPrivateNetwork =
    ::testing::AddGlobalTestEnvironment(new PrivateNetwork);

class PartitionTest : public ::testing::Test {
 protected:
  // Lab nodes: etcd members first, then replicas.
  static int MemberNode(int m) { return m; }
  static int ReplicaNode(int r) { return kMembers + r; }

  void SetUp() override {
    if (!EtcdCluster::Available()) {
      GTEST_SKIP() << EtcdCluster::kEtcdPath
                   << " is absent: install etcd-server to run these tests";
    }
    if (!NetworkLab::Entered()) {
      GTEST_SKIP() << "cannot make network namespaces here: "
                   << PrivateNetwork::why();
    }
    lab_ = std::make_unique<NetworkLab>(kMembers + kReplicas);
    if (!lab_->ok()) {
      GTEST_SKIP() << "cannot make network namespaces here: " << lab_->log();
    }
    std::vector<EtcdMemberPlace> places;
    for (int m = 0; m < kMembers; ++m) {
      places.push_back(
          {lab_->address(MemberNode(m)), lab_->exec_prefix(MemberNode(m))});
    }
    cluster_ = std::make_unique<EtcdCluster>(places);
    ASSERT_TRUE(cluster_->Start()) << cluster_->logs();
    // Every replica's client starts on a member that is not etcd's raft
    // leader: the "one etcd member cut off" case then costs no etcd
    // election, only the client's move to the next member.
    first_member_ = cluster_->QuietMember();
    ASSERT_GE(first_member_, 0) << cluster_->logs();
    for (int r = 0; r < kReplicas; ++r) {
      replicas_.push_back(Replica(r));
      ASSERT_TRUE(replicas_[r]->Start()) << replicas_[r]->output();
      if (r == 0) {
        ASSERT_EQ(NewLeader(-1), 0) << replicas_[0]->output();
      }
    }
  }

  // After every case, healed: every replica's store passes its check.
  void TearDown() override {
    if (lab_) lab_->HealAll();
    std::vector<DaemonProcess*> replicas;
    for (auto& replica : replicas_) replicas.push_back(replica.get());
    StopAndCheckStores(replicas);
  }

  std::unique_ptr<DaemonProcess> Replica(int r) {
    std::vector<std::string> endpoints = {cluster_->endpoint(first_member_)};
    for (int m = 0; m < kMembers; ++m) {
      if (m != first_member_) endpoints.push_back(cluster_->endpoint(m));
    }
    auto replica = StartDemoDaemon(
        {"--etcd-endpoints=" + absl::StrJoin(endpoints, ","),
         absl::StrCat("--replica-id=r", r), "--etcd-prefix=/phalanx/part",
         "--etcd-lease-ttl=2s", "--insecure"});
    replica->Place(lab_->exec_prefix(ReplicaNode(r)),
                   lab_->address(ReplicaNode(r)) + ":50051");
    return replica;
  }

  // Two writers over every replica, 150 paced submits each (about 10 s),
  // started; returns once `acknowledged` writes are (or after 20 s).
  std::unique_ptr<Writers> StartWriters(int acknowledged) {
    std::vector<DaemonProcess*> all;
    for (auto& replica : replicas_) all.push_back(replica.get());
    auto writers = std::make_unique<Writers>(all, 150,
                                             /*stop_on_error=*/false, kPause);
    writers->Start();
    Eventually([&] { return writers->acknowledged() >= acknowledged; });
    return writers;
  }

  // The replica reporting Leader SERVING, other than `except`, waiting
  // (at most 20 s) for one; -1 when none does.
  int NewLeader(int except) {
    int found = -1;
    Eventually([&] {
      for (int r = 0; r < static_cast<int>(replicas_.size()); ++r) {
        if (r == except || replicas_[r]->pid() <= 0) continue;
        if (HealthStatus(replicas_[r]->channel(), kLeader) == kServing) {
          found = r;
          return true;
        }
      }
      return false;
    });
    return found;
  }

  // After the heal: restarts replicas that exited (they follow), then
  // checks the writers' acknowledgements on the leader and that every
  // replica lists what the leader lists, at its revision.
  void CheckAfterHeal(const Writers& writers, int leader) {
    for (auto& replica : replicas_) {
      if (replica->pid() <= 0) {
        ASSERT_TRUE(replica->Start()) << replica->output();
      }
    }
    auto stub = replicas_[leader]->Scheduler();
    SubmitOk(*stub, SubmitRequest("b", 1, 1));  // the leader still commits
    const v1::ListGangsResponse listed = ListAll(*stub);
    writers.Check(listed);
    writers.CheckErrorsAreRetryable();
    for (int r = 0; r < kReplicas; ++r) {
      if (r == leader) continue;
      auto replica = replicas_[r]->Scheduler();
      ASSERT_TRUE(Eventually([&] {
        v1::ListGangsRequest request;
        request.set_page_size(1);
        v1::ListGangsResponse response;
        grpc::ClientContext context;
        context.set_deadline(
            absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
        return replica->ListGangs(&context, request, &response).ok() &&
               response.revision() >= listed.revision();
      })) << replicas_[r]->output();
      EXPECT_EQ(ListAll(*replica).SerializeAsString(),
                WithoutPlans(listed).SerializeAsString())
          << "replica r" << r;
      EXPECT_EQ(HealthStatus(replicas_[r]->channel(), ""), kServing);
    }
  }

  // Declared first: the namespaces go last, after every process in them.
  std::unique_ptr<NetworkLab> lab_;
  std::unique_ptr<EtcdCluster> cluster_;
  std::vector<std::unique_ptr<DaemonProcess>> replicas_;
  int first_member_ = 0;
};

TEST_F(PartitionTest, ALeaderCutOffFromEtcdStepsDownBeforeANewLeaderServes) {
  auto load = StartWriters(20);
  Writers& writers = *load;
  const absl::Time cut = absl::Now();
  for (int m = 0; m < kMembers; ++m) {
    ASSERT_TRUE(lab_->Cut(ReplicaNode(0), MemberNode(m))) << lab_->log();
  }
  // Clients still reach the old leader: watch it stop reporting Leader
  // and a new one start, in one loop.
  absl::Time stepped_down = absl::InfiniteFuture();
  absl::Time new_leader_at = absl::InfiniteFuture();
  int next = -1;
  Eventually([&] {
    if (stepped_down == absl::InfiniteFuture() &&
        HealthStatus(replicas_[0]->channel(), kLeader) != kServing) {
      stepped_down = absl::Now();
    }
    for (int r = 1; r < kReplicas && next < 0; ++r) {
      if (HealthStatus(replicas_[r]->channel(), kLeader) == kServing) {
        next = r;
        new_leader_at = absl::Now();
      }
    }
    return next >= 0 && stepped_down != absl::InfiniteFuture();
  });
  ASSERT_GE(next, 0) << replicas_[1]->output() << replicas_[2]->output();
  EXPECT_LE(stepped_down, new_leader_at)
      << "the old leader still reported Leader when the new one served";
  EXPECT_EQ(replicas_[0]->WaitForExit(absl::Seconds(10)), 3)
      << replicas_[0]->output();
  writers.Join();
  ASSERT_TRUE(lab_->HealAll()) << lab_->log();
  std::printf(
      "leader cut off from etcd: it stopped reporting Leader %.2f s after "
      "the cut; a new leader served %.2f s after it; longest write gap "
      "%.2f s; %d writes acknowledged, %zu errors (lease TTL 2 s)\n",
      absl::ToDoubleSeconds(stepped_down - cut),
      absl::ToDoubleSeconds(new_leader_at - cut),
      absl::ToDoubleSeconds(writers.LongestGap(cut)), writers.acknowledged(),
      writers.errors());
  CheckAfterHeal(writers, next);
}

TEST_F(PartitionTest, ALeaderCutOffFromItsClientsOnlyKeepsLeading) {
  auto load = StartWriters(20);
  Writers& writers = *load;
  const absl::Time cut = absl::Now();
  ASSERT_TRUE(lab_->Cut(ReplicaNode(0), NetworkLab::kClients)) << lab_->log();
  absl::SleepFor(kCut);
  // No failover: etcd still hears from the leader.
  for (int r = 1; r < kReplicas; ++r) {
    EXPECT_NE(HealthStatus(replicas_[r]->channel(), kLeader), kServing);
  }
  ASSERT_TRUE(lab_->HealAll()) << lab_->log();
  writers.Join();
  EXPECT_EQ(HealthStatus(replicas_[0]->channel(), kLeader), kServing)
      << replicas_[0]->output();
  std::printf(
      "leader cut off from its clients for 6 s: no new leader; longest "
      "write gap %.2f s; %d writes acknowledged, %zu errors\n",
      absl::ToDoubleSeconds(writers.LongestGap(cut)), writers.acknowledged(),
      writers.errors());
  CheckAfterHeal(writers, 0);
}

TEST_F(PartitionTest, OneEtcdMemberCutOffCausesNoFailover) {
  auto load = StartWriters(20);
  Writers& writers = *load;
  // The member every replica's client is on, not etcd's raft leader.
  const absl::Time cut = absl::Now();
  ASSERT_TRUE(lab_->Isolate(MemberNode(first_member_))) << lab_->log();
  absl::SleepFor(kCut);
  ASSERT_TRUE(lab_->HealAll()) << lab_->log();
  writers.Join();
  replicas_[0]->ReadOutput();
  EXPECT_EQ(HealthStatus(replicas_[0]->channel(), kLeader), kServing)
      << replicas_[0]->output();
  for (int r = 1; r < kReplicas; ++r) {
    EXPECT_NE(HealthStatus(replicas_[r]->channel(), kLeader), kServing);
  }
  std::printf(
      "one etcd member (the clients' first) cut off for 6 s: no new "
      "leader; "
      "longest write gap %.2f s; %d writes acknowledged, %zu errors\n",
      absl::ToDoubleSeconds(writers.LongestGap(cut)), writers.acknowledged(),
      writers.errors());
  CheckAfterHeal(writers, 0);
}

TEST_F(PartitionTest, AFollowerCutOffFromEtcdStopsServingAndCatchesUp) {
  auto load = StartWriters(10);
  Writers& writers = *load;
  const absl::Time cut = absl::Now();
  for (int m = 0; m < kMembers; ++m) {
    ASSERT_TRUE(lab_->Cut(ReplicaNode(1), MemberNode(m))) << lab_->log();
  }
  // The bound is 0.6 of the 2 s TTL; allowed twice the TTL here.
  ASSERT_TRUE(Eventually(
      [&] { return HealthStatus(replicas_[1]->channel(), "") != kServing; },
      80))
      << replicas_[1]->output();
  const absl::Duration not_serving = absl::Now() - cut;
  {
    auto stub = replicas_[1]->Scheduler();
    v1::ListGangsRequest request;
    v1::ListGangsResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    EXPECT_EQ(stub->ListGangs(&context, request, &response).error_code(),
              grpc::StatusCode::UNAVAILABLE);
  }
  absl::SleepFor(kCut - not_serving);
  const absl::Time healed = absl::Now();
  ASSERT_TRUE(lab_->HealAll()) << lab_->log();
  ASSERT_TRUE(Eventually([&] {
    return HealthStatus(replicas_[1]->channel(), "") == kServing;
  })) << replicas_[1]->output();
  const absl::Duration serving_again = absl::Now() - healed;
  writers.Join();
  std::printf(
      "follower cut off from etcd: NOT_SERVING and its reads refused "
      "%.2f s after the cut; SERVING again %.2f s after the heal; longest "
      "write gap %.2f s (lease TTL 2 s)\n",
      absl::ToDoubleSeconds(not_serving), absl::ToDoubleSeconds(serving_again),
      absl::ToDoubleSeconds(writers.LongestGap(cut)));
  EXPECT_EQ(HealthStatus(replicas_[0]->channel(), kLeader), kServing);
  CheckAfterHeal(writers, 0);
}

TEST_F(PartitionTest, AFullHealAfterALeaderChangeConverges) {
  auto load = StartWriters(20);
  Writers& writers = *load;
  const absl::Time cut = absl::Now();
  ASSERT_TRUE(lab_->Isolate(ReplicaNode(0))) << lab_->log();
  const int next = NewLeader(0);
  ASSERT_GT(next, 0) << replicas_[1]->output() << replicas_[2]->output();
  const absl::Duration new_leader = absl::Now() - cut;
  // Cut off from everything, the old leader gives up by itself.
  EXPECT_EQ(replicas_[0]->WaitForExit(absl::Seconds(10)), 3)
      << replicas_[0]->output();
  writers.Join();
  ASSERT_TRUE(lab_->HealAll()) << lab_->log();
  std::printf(
      "leader cut off from everything: a new leader served %.2f s after "
      "the cut; longest write gap %.2f s; %d writes acknowledged, %zu "
      "errors (lease TTL 2 s)\n",
      absl::ToDoubleSeconds(new_leader),
      absl::ToDoubleSeconds(writers.LongestGap(cut)), writers.acknowledged(),
      writers.errors());
  CheckAfterHeal(writers, next);
}

}  // namespace
}  // namespace phalanx::testing
