// EtcdStateStore against a real 3-member etcd cluster (tests/etcd_cluster.h)
// and real RocksDB replicas in temporary directories. The leader key is put
// by hand here; server/etcd_election_test.cc runs the real election.
#include "storage/etcd/etcd_state_store.h"

#include <filesystem>
#include <memory>
#include <string>

#include "core/scheduler.h"
#include "core/testing.h"
#include "gtest/gtest.h"
#include "tests/etcd_cluster.h"
#include "tests/etcd_fixture.h"

namespace phalanx::storage::etcd {
namespace {

using core::testing::MakeNodes;
using core::testing::Spec;
using ::phalanx::testing::EtcdCluster;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);
constexpr char kPrefix[] = "/phalanx/test";

class EtcdStateStoreTest : public ::phalanx::testing::EtcdClusterTest {
 protected:
  // A replica whose RocksDB lives in `cluster_->root()/name`.
  std::unique_ptr<EtcdStateStore> Replica(const std::string& name,
                                          size_t max_batch_bytes = 0) {
    auto local = RocksDbStore::Open(cluster_->root() + "/" + name);
    EXPECT_TRUE(local.ok()) << local.status();
    EtcdStateStoreOptions options;
    options.prefix = kPrefix;
    if (max_batch_bytes > 0) options.max_batch_bytes = max_batch_bytes;
    return std::make_unique<EtcdStateStore>(client_.get(), std::move(*local),
                                            options);
  }

  // Puts the leader key; returns its create revision (the term).
  int64_t Lead() {
    epb::PutRequest put;
    put.set_key(std::string(kPrefix) + "/leader");
    put.set_value("r0 127.0.0.1:1");
    auto response = client_->Put(put);
    EXPECT_TRUE(response.ok()) << response.status();
    return response->header().revision();
  }

  int LogEntries() {
    epb::RangeRequest range;
    range.set_key(std::string(kPrefix) + "/log/");
    range.set_range_end(PrefixEnd(std::string(kPrefix) + "/log/"));
    range.set_count_only(true);
    return static_cast<int>(client_->Range(range)->count());
  }
};

// A scheduler with 4 nodes, queue "llm" and one admitted 2-pod gang.
std::unique_ptr<core::Scheduler> Populated() {
  core::Config config;
  config.topology_levels = {"block", "rack"};
  auto s = std::make_unique<core::Scheduler>(config);
  EXPECT_TRUE(s->UpsertNodes(MakeNodes(1, 2, 2)).ok());
  core::Queue queue;
  queue.name = core::QueueName("llm");
  EXPECT_TRUE(s->PutQueue(queue).ok());
  EXPECT_TRUE(s->Submit(Spec("llm").Pods(2, 8).RequestId("r1"), kT0).ok());
  s->RunCycle(kT0 + absl::Seconds(1));
  return s;
}

TEST_F(EtcdStateStoreTest, AnotherReplicaCatchesUpWithTheLog) {
  auto leader = Replica("a");
  leader->set_term(Lead());
  auto s = Populated();
  ASSERT_TRUE(leader->Commit(s->TakeMutation()).ok());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(s->Submit(Spec("llm").Pods(1, 1), kT0).ok());
    ASSERT_TRUE(leader->Commit(s->TakeMutation()).ok());
  }
  EXPECT_EQ(leader->applied_seq(), 3);
  EXPECT_EQ(LogEntries(), 3);

  auto follower = Replica("b");
  auto state = follower->LoadAll();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(follower->applied_seq(), 3);
  EXPECT_EQ(state->nodes.size(), 4u);
  EXPECT_EQ(state->queues.size(), 1u);
  ASSERT_EQ(state->gangs.size(), 3u);
  EXPECT_EQ(state->gangs[0], *s->FindGang(core::GangId("g-000001")));
  EXPECT_EQ(state->meta, leader->LoadAll()->meta);
  EXPECT_TRUE(core::Scheduler::Restore(*state, kT0).ok());
}

TEST_F(EtcdStateStoreTest, ARestartedReplicaResumesFromItsAppliedSeq) {
  auto leader = Replica("a");
  leader->set_term(Lead());
  auto s = Populated();
  ASSERT_TRUE(leader->Commit(s->TakeMutation()).ok());
  {
    auto follower = Replica("b");
    ASSERT_EQ(*follower->CatchUp(), 1);
  }
  ASSERT_TRUE(s->Submit(Spec("llm").Pods(1, 1), kT0).ok());
  ASSERT_TRUE(leader->Commit(s->TakeMutation()).ok());
  auto follower = Replica("b");
  EXPECT_EQ(follower->applied_seq(), 1);
  EXPECT_EQ(*follower->CatchUp(), 1);  // only the new entry
  EXPECT_EQ(follower->applied_seq(), 2);
  EXPECT_EQ(follower->LoadAll()->gangs.size(), 2u);
}

TEST_F(EtcdStateStoreTest, CommitWithoutTheLeadersTermIsRefused) {
  auto store = Replica("a");
  auto s = Populated();
  const core::Mutation m = s->TakeMutation();
  EXPECT_EQ(store->Commit(m).code(), absl::StatusCode::kFailedPrecondition);
  const int64_t term = Lead();
  store->set_term(term - 1);  // a term that is not the key's
  EXPECT_EQ(store->Commit(m).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(LogEntries(), 0);
  EXPECT_EQ(store->applied_seq(), 0);
  store->set_term(term);
  EXPECT_TRUE(store->Commit(m).ok());
  EXPECT_EQ(LogEntries(), 1);
}

TEST_F(EtcdStateStoreTest, AReplicaBehindTheLogCannotAppend) {
  const int64_t term = Lead();
  auto a = Replica("a");
  auto b = Replica("b");
  a->set_term(term);
  b->set_term(term);
  auto s = Populated();
  ASSERT_TRUE(a->Commit(s->TakeMutation()).ok());
  ASSERT_TRUE(s->Submit(Spec("llm").Pods(1, 1), kT0).ok());
  // b has not applied entry 1, so it tries to write entry 1 again.
  EXPECT_EQ(b->Commit(s->TakeMutation()).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(LogEntries(), 1);
}

TEST(EtcdStateStoreBoundTest, DefaultBoundFitsEtcdsRequestLimit) {
  EXPECT_LT(kDefaultMaxBatchBytes, 1536u * 1024u);
  EXPECT_GT(kDefaultMaxBatchBytes, 1024u * 1024u);
}

}  // namespace
}  // namespace phalanx::storage::etcd
