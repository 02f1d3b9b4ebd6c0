// EtcdElection, and fencing of EtcdStateStore by the term it wins, against
// a real 3-member etcd cluster (tests/etcd_cluster.h).
#include "server/etcd_election.h"

#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "core/scheduler.h"
#include "core/testing.h"
#include "gtest/gtest.h"
#include "storage/etcd/etcd_state_store.h"
#include "storage/sync/mutex.h"
#include "tests/etcd_cluster.h"
#include "tests/etcd_fixture.h"

namespace phalanx::server {
namespace {

using ::phalanx::testing::EtcdCluster;
using storage::etcd::EtcdClient;
using storage::etcd::EtcdStateStore;

constexpr char kPrefix[] = "/phalanx/test";
const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

// A candidate: its election and whether it was told of a loss.
// `lost` outlives `election`, whose renewal thread may notify it.
struct Candidate {
  Notification lost;
  std::unique_ptr<EtcdElection> election;
};

class EtcdElectionTest : public ::phalanx::testing::EtcdClusterTest {
 protected:
  std::unique_ptr<Candidate> NewCandidate(
      const std::string& id, absl::Duration lease_ttl = absl::Seconds(2)) {
    auto candidate = std::make_unique<Candidate>();
    EtcdElectionOptions options;
    options.prefix = kPrefix;
    options.replica_id = id;
    options.address = "127.0.0.1:" + std::to_string(7000 + id.size());
    options.lease_ttl = lease_ttl;
    Candidate* raw = candidate.get();
    candidate->election = std::make_unique<EtcdElection>(
        client_.get(), options, [raw] { raw->lost.Notify(); });
    return candidate;
  }

  std::unique_ptr<EtcdStateStore> Replica(const std::string& name) {
    auto local = storage::RocksDbStore::Open(cluster_->root() + "/" + name);
    EXPECT_TRUE(local.ok()) << local.status();
    storage::etcd::EtcdStateStoreOptions options;
    options.prefix = kPrefix;
    return std::make_unique<EtcdStateStore>(client_.get(), std::move(*local),
                                            options);
  }
};

absl::Time In(absl::Duration d) { return absl::Now() + d; }

// Runs b's campaign on a thread; join() it before reading `result`.
struct Background {
  absl::StatusOr<int64_t> result = absl::UnknownError("not run");
  std::thread thread;
  void Run(EtcdElection& election, absl::Duration timeout) {
    thread = std::thread([this, &election, timeout] {
      result = election.Campaign(In(timeout));
    });
  }
  void join() { thread.join(); }
};

TEST_F(EtcdElectionTest, OfTwoCandidatesOneLeads) {
  auto a = NewCandidate("a");
  auto b = NewCandidate("bb");
  auto term = a->election->Campaign(In(absl::Seconds(10)));
  ASSERT_TRUE(term.ok()) << term.status();
  EXPECT_GT(*term, 0);
  EXPECT_TRUE(a->election->leading());
  EXPECT_EQ(b->election->Campaign(In(absl::Milliseconds(500))).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(b->election->leading());
  auto leader = b->election->Leader();
  ASSERT_TRUE(leader.ok()) << leader.status();
  EXPECT_EQ(leader->replica_id, "a");
  EXPECT_EQ(leader->address, "127.0.0.1:7001");
  EXPECT_EQ(leader->term, *term);
  EXPECT_FALSE(a->lost.HasBeenNotified());
}

TEST_F(EtcdElectionTest, WhenTheLeadersLeaseIsRevokedTheOtherWins) {
  auto a = NewCandidate("a");
  auto b = NewCandidate("bb");
  auto a_term = a->election->Campaign(In(absl::Seconds(10)));
  ASSERT_TRUE(a_term.ok()) << a_term.status();
  Background campaign;
  campaign.Run(*b->election, absl::Seconds(20));
  // What an expiry does, at once: the lease and its key are gone.
  ASSERT_TRUE(client_->LeaseRevoke(a->election->lease()).ok());
  campaign.join();
  ASSERT_TRUE(campaign.result.ok()) << campaign.result.status();
  EXPECT_GT(*campaign.result, *a_term);
  EXPECT_TRUE(b->election->leading());
  // a notices at its next renewal (every ttl/3) and stops leading.
  EXPECT_TRUE(a->lost.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_FALSE(a->election->leading());
  EXPECT_EQ(b->election->Leader()->replica_id, "bb");
}

TEST_F(EtcdElectionTest, ResignHandsOverAtOnce) {
  auto a = NewCandidate("a");
  auto b = NewCandidate("bb");
  ASSERT_TRUE(a->election->Campaign(In(absl::Seconds(10))).ok());
  Background campaign;
  campaign.Run(*b->election, absl::Seconds(20));
  ASSERT_TRUE(a->election->Resign().ok());
  campaign.join();
  ASSERT_TRUE(campaign.result.ok()) << campaign.result.status();
  EXPECT_FALSE(a->election->leading());
  EXPECT_FALSE(a->lost.HasBeenNotified());  // resigning is not losing
}

TEST_F(EtcdElectionTest, TheLeaseOutlivesManyTtlsWhileRenewed) {
  auto a = NewCandidate("a");
  ASSERT_TRUE(a->election->Campaign(In(absl::Seconds(10))).ok());
  // 2 TTLs: without renewals the key would be gone.
  EXPECT_FALSE(a->lost.WaitForNotificationWithTimeout(absl::Seconds(4)));
  EXPECT_TRUE(a->election->leading());
  EXPECT_EQ(a->election->Leader()->term, a->election->term());
}

// A mutation that admits one more gang on `s`.
core::Mutation Batch(core::Scheduler& s) {
  EXPECT_TRUE(s.Submit(core::testing::Spec("llm").Pods(1, 1), kT0).ok());
  s.RunCycle(kT0);
  return s.TakeMutation();
}

std::unique_ptr<core::Scheduler> Fleet() {
  auto s = std::make_unique<core::Scheduler>(core::Config{});
  EXPECT_TRUE(s->UpsertNodes(core::testing::MakeNodes(1, 1, 2)).ok());
  core::Queue queue;
  queue.name = core::QueueName("llm");
  EXPECT_TRUE(s->PutQueue(queue).ok());
  return s;
}

TEST_F(EtcdElectionTest, ADeposedLeaderCannotCommitEvenAfterWakingUp) {
  auto a = NewCandidate("a");
  auto b = NewCandidate("bb");
  auto a_store = Replica("a");
  auto b_store = Replica("b");
  auto a_term = a->election->Campaign(In(absl::Seconds(10)));
  ASSERT_TRUE(a_term.ok()) << a_term.status();
  a_store->set_term(*a_term);
  auto a_state = Fleet();
  ASSERT_TRUE(a_store->Commit(a_state->TakeMutation()).ok());

  // a "pauses": its lease is gone (as if it expired while a was frozen),
  // b wins and catches up, but has not committed yet.
  ASSERT_TRUE(client_->LeaseRevoke(a->election->lease()).ok());
  auto b_term = b->election->Campaign(In(absl::Seconds(10)));
  ASSERT_TRUE(b_term.ok()) << b_term.status();
  ASSERT_TRUE(b_store->LoadAll().ok());
  b_store->set_term(*b_term);
  // a "wakes up" with its old term and the next free seq: refused.
  const absl::Status stale = a_store->Commit(Batch(*a_state));
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted) << stale;
  EXPECT_EQ(a_store->applied_seq(), 1);

  // b commits; a, still on its old term, is refused again.
  auto b_state = Fleet();
  ASSERT_TRUE(b_store->Commit(Batch(*b_state)).ok());
  EXPECT_EQ(b_store->applied_seq(), 2);
  EXPECT_EQ(a_store->Commit(Batch(*a_state)).code(),
            absl::StatusCode::kAborted);
  EXPECT_TRUE(a->lost.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

// Pauses every etcd member (nothing answers, as in a partition) until
// destroyed.
class EtcdFrozen {
 public:
  explicit EtcdFrozen(EtcdCluster& cluster) : cluster_(cluster) {
    for (int m = 0; m < cluster_.size(); ++m) cluster_.Pause(m);
  }
  ~EtcdFrozen() {
    for (int m = 0; m < cluster_.size(); ++m) cluster_.Resume(m);
  }

 private:
  EtcdCluster& cluster_;
};

// Every member hangs while the leader resigns: its first revoke, one
// attempt per member, gets no answer; it is retried while the lease holds,
// so once etcd answers again the key goes at once, not when the 10 s lease
// would have expired.
TEST_F(EtcdElectionTest, ResignRetriesARevokeNoMemberAnswered) {
  auto a = NewCandidate("a", absl::Seconds(10));
  auto b = NewCandidate("bb", absl::Seconds(10));
  ASSERT_TRUE(a->election->Campaign(In(absl::Seconds(10))).ok());
  const absl::Time lease_end = a->election->valid_until();
  absl::Time resumed;
  absl::Time resigned_at;
  absl::Status resigned;
  std::thread resign;
  {
    EtcdFrozen frozen(*cluster_);
    resign = std::thread([&] {
      resigned = a->election->Resign();
      resigned_at = absl::Now();
    });
    // Past the first revoke's three 1 s attempts.
    absl::SleepFor(absl::Milliseconds(3500));
    resumed = absl::Now();
  }  // every member resumes
  resign.join();
  EXPECT_TRUE(resigned.ok()) << resigned;
  EXPECT_LT(absl::Now(), lease_end);
  EXPECT_FALSE(a->lost.HasBeenNotified());
  // The key is gone: b wins within a second or two, not a lease TTL.
  auto term = b->election->Campaign(In(absl::Seconds(3)));
  EXPECT_TRUE(term.ok()) << term.status();
  std::printf(
      "revoke retried: Resign returned %.2f s after etcd was resumed, "
      "%.2f s before the lease could expire\n",
      absl::ToDoubleSeconds(resigned_at - resumed),
      absl::ToDoubleSeconds(lease_end - resigned_at));
}

TEST_F(EtcdElectionTest, ALeaderCutOffFromEtcdStopsBeforeItsLeaseCanExpire) {
  // Attempts that may wait 10 s: the renewals' own deadline must not.
  storage::etcd::EtcdClientOptions slow;
  slow.endpoints = cluster_->endpoints();
  slow.call_timeout = absl::Seconds(10);
  auto client = EtcdClient::Connect(slow);
  ASSERT_TRUE(client.ok()) << client.status();
  Notification lost;
  absl::Time lost_at;
  EtcdElectionOptions options;
  options.prefix = kPrefix;
  options.replica_id = "a";
  options.address = "127.0.0.1:7001";
  options.lease_ttl = absl::Seconds(2);
  EtcdElection election(client->get(), options, [&] {
    lost_at = absl::Now();
    lost.Notify();
  });
  const absl::Time before = absl::Now();
  ASSERT_TRUE(election.Campaign(In(absl::Seconds(10))).ok());
  EXPECT_GT(election.valid_until(), before);
  EXPECT_LE(election.valid_until(), before + options.lease_ttl);
  absl::Time valid_until;
  {
    EtcdFrozen frozen(*cluster_);
    absl::SleepFor(absl::Milliseconds(200));  // a reply in flight lands
    valid_until = election.valid_until();
    ASSERT_TRUE(lost.WaitForNotificationWithTimeout(absl::Seconds(10)));
  }
  // The last renewal etcd acknowledged was sent at valid_until - 0.9 TTL;
  // etcd counts its TTL from later than that.
  EXPECT_LT(lost_at, valid_until + options.lease_ttl * kLeaseMargin);
  EXPECT_FALSE(election.leading());
  EXPECT_EQ(election.valid_until(), absl::InfinitePast());
}

TEST_F(EtcdElectionTest, ACommitThatCannotReachEtcdWithinTheLeaseIsDeposed) {
  auto a = NewCandidate("a");
  auto store = Replica("a");
  auto term = a->election->Campaign(In(absl::Seconds(10)));
  ASSERT_TRUE(term.ok()) << term.status();
  store->set_term(*term);
  absl::Status deposed;
  store->set_lease_fence({[&] { return a->election->valid_until(); },
                          [&](const absl::Status& why) { deposed = why; }});
  auto state = Fleet();
  ASSERT_TRUE(store->Commit(state->TakeMutation()).ok());
  absl::Status commit;
  {
    EtcdFrozen frozen(*cluster_);
    commit = store->Commit(Batch(*state));
  }
  EXPECT_EQ(commit.code(), absl::StatusCode::kAborted) << commit;
  EXPECT_EQ(deposed, commit);
  EXPECT_EQ(store->applied_seq(), 1);  // nothing applied locally
  EXPECT_TRUE(a->lost.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

}  // namespace
}  // namespace phalanx::server
