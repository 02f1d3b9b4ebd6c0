// Batches larger than one etcd request (log.proto, LogBatch.parts) against
// a real 3-member etcd cluster (tests/etcd_cluster.h) and real RocksDB
// replicas in temporary directories: a split batch commits and every
// replica applies it whole, at its last part's seq; the orphan parts of a
// leader that stopped between parts are ignored by the next leader and by
// followers, whether the next batch is split or whole; a snapshot splits a
// record larger than a request. The leader key is put by hand, as in
// etcd_state_store_test.cc.
#include <memory>
#include <string>
#include <vector>

#include "core/scheduler.h"
#include "core/testing.h"
#include "gtest/gtest.h"
#include "phalanx/storage/v1/log.pb.h"
#include "storage/etcd/etcd_state_store.h"
#include "storage/etcd/store_testing.h"
#include "tests/etcd_cluster.h"
#include "tests/etcd_fixture.h"

namespace phalanx::storage::etcd {
namespace {

using core::testing::MakeNodes;
using core::testing::Spec;
using ::phalanx::storage::etcd::testing::ExpectSameState;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);
constexpr char kPrefix[] = "/phalanx/parts";
constexpr size_t kSmallBound = 4096;

// One call of the apply listener.
struct Applied {
  int64_t seq = 0;
  int64_t after = 0;
  size_t gangs = 0;
  size_t nodes = 0;
};

class EtcdPartsTest : public ::phalanx::testing::EtcdClusterTest {
 protected:
  static EtcdStateStoreOptions Options(size_t max_batch_bytes) {
    EtcdStateStoreOptions options;
    options.prefix = kPrefix;
    options.max_batch_bytes = max_batch_bytes;
    options.snapshot_every_entries = 0;
    options.snapshot_every_bytes = 0;
    options.snapshot_chunk_bytes = 2048;
    return options;
  }

  // A replica whose RocksDB lives in `cluster_->root()/name`.
  std::unique_ptr<EtcdStateStore> Replica(const std::string& name,
                                          EtcdStateStoreOptions options) {
    return testing::OpenReplica(client_.get(), cluster_->root() + "/" + name,
                                std::move(options));
  }
  std::unique_ptr<EtcdStateStore> Replica(const std::string& name) {
    return Replica(name, Options(kSmallBound));
  }

  // Records every batch `store` applies through CatchUp in `applied`.
  static void Listen(EtcdStateStore& store, std::vector<Applied>& applied) {
    store.set_apply_listener([&applied](const core::Mutation& m, int64_t seq,
                                        int64_t after) {
      applied.push_back({seq, after, m.gangs_put.size(), m.nodes_put.size()});
    });
  }

  // (Re)creates the leader key; returns its create revision (a new term).
  int64_t Lead() { return testing::Lead(client_.get(), kPrefix); }

  // The log's entries, parsed.
  std::vector<storage::v1::LogBatch> Log(size_t* largest = nullptr) {
    epb::RangeRequest range;
    range.set_key(std::string(kPrefix) + "/log/");
    range.set_range_end(PrefixEnd(range.key()));
    std::vector<storage::v1::LogBatch> entries;
    absl::StatusOr<epb::RangeResponse> response = client_->Range(range);
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return entries;
    for (const auto& kv : response->kvs()) {
      if (largest != nullptr) *largest = std::max(*largest, kv.value().size());
      entries.emplace_back();
      EXPECT_TRUE(entries.back().ParseFromString(kv.value()));
    }
    return entries;
  }
};

// A scheduler with 4 nodes and queue "llm".
std::unique_ptr<core::Scheduler> Populated() {
  core::Config config;
  config.topology_levels = {"block", "rack"};
  auto s = std::make_unique<core::Scheduler>(config);
  EXPECT_TRUE(s->UpsertNodes(MakeNodes(1, 2, 2)).ok());
  core::Queue queue;
  queue.name = core::QueueName("llm");
  EXPECT_TRUE(s->PutQueue(queue).ok());
  return s;
}

// A scheduler with 64 nodes (a batch of several KiB), queue "llm" and
// `gangs` admitted 1-GPU gangs.
std::unique_ptr<core::Scheduler> Big(int gangs) {
  core::Config config;
  config.topology_levels = {"block", "rack"};
  auto s = std::make_unique<core::Scheduler>(config);
  EXPECT_TRUE(s->UpsertNodes(MakeNodes(2, 4, 8)).ok());
  core::Queue queue;
  queue.name = core::QueueName("llm");
  EXPECT_TRUE(s->PutQueue(queue).ok());
  for (int i = 0; i < gangs; ++i) {
    EXPECT_TRUE(
        s->Submit(Spec("llm").Pods(1, 1).RequestId("r" + std::to_string(i)),
                  kT0)
            .ok());
  }
  s->RunCycle(kT0 + absl::Seconds(1));
  return s;
}

TEST_F(EtcdPartsTest, ABatchOverTheBoundCommitsInPartsAndAppliesWhole) {
  auto leader = Replica("a");
  leader->set_term(Lead());
  auto s = Big(40);
  const core::Mutation m = s->TakeMutation();
  ASSERT_TRUE(leader->Commit(m).ok());
  size_t largest = 0;
  std::vector<storage::v1::LogBatch> log = Log(&largest);
  ASSERT_GE(log.size(), 5u);  // tens of KiB in 4 KiB entries
  EXPECT_LE(largest, kSmallBound);
  for (size_t i = 0; i < log.size(); ++i) {
    EXPECT_EQ(log[i].seq(), static_cast<int64_t>(i + 1));
    EXPECT_EQ(log[i].batch_seq(), 1);
    EXPECT_EQ(log[i].part(), static_cast<int32_t>(i));
    EXPECT_EQ(log[i].parts(), static_cast<int32_t>(log.size()));
    EXPECT_EQ(log[i].gangs_put_size(), 0);  // only slices of the encoding
  }
  const int64_t last = static_cast<int64_t>(log.size());
  EXPECT_EQ(leader->applied_seq(), last);
  // A small batch after it is one whole entry, as always.
  ASSERT_TRUE(s->Submit(Spec("llm").Pods(1, 1), kT0).ok());
  ASSERT_TRUE(leader->Commit(s->TakeMutation()).ok());
  log = Log();
  ASSERT_EQ(log.size(), static_cast<size_t>(last + 1));
  EXPECT_EQ(log.back().parts(), 0);
  EXPECT_EQ(log.back().gangs_put_size(), 1);

  // Another replica (with etcd's default bound: it reads any entry) applies
  // the split batch once, whole, at its last part's seq.
  auto follower = Replica("b", Options(kDefaultMaxBatchBytes));
  std::vector<Applied> applied;
  Listen(*follower, applied);
  ASSERT_EQ(*follower->CatchUp(), last + 1);
  ASSERT_EQ(applied.size(), 2u);
  EXPECT_EQ(applied[0].seq, last);
  EXPECT_EQ(applied[0].after, 0);
  EXPECT_EQ(applied[0].gangs, m.gangs_put.size());
  EXPECT_EQ(applied[0].nodes, 64u);
  EXPECT_EQ(applied[1].seq, last + 1);
  EXPECT_EQ(applied[1].after, last);
  ExpectSameState(*leader, *follower);
  auto state = follower->LoadAll();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->gangs.size(), 41u);
  EXPECT_TRUE(core::Scheduler::Restore(*state, kT0).ok());
}

TEST_F(EtcdPartsTest, ALeaderThatStopsBetweenPartsLeavesOrphansNobodyApplies) {
  const int64_t first_term = Lead();
  auto a = Replica("a");
  a->set_term(first_term);
  auto s = Populated();
  ASSERT_TRUE(a->Commit(s->TakeMutation()).ok());  // entry 1, whole
  // Entries 2 and 3: two parts of a batch that never completes.
  EtcdStateStoreOptions crashing = Options(kSmallBound);
  crashing.commit_crash_after_parts = 2;
  {
    auto dying = Replica("a2", crashing);
    ASSERT_EQ(*dying->CatchUp(), 1);
    dying->set_term(first_term);
    auto big = Big(40);
    EXPECT_EQ(dying->Commit(big->TakeMutation()).code(),
              absl::StatusCode::kAborted);
    EXPECT_EQ(dying->applied_seq(), 1);
  }
  ASSERT_EQ(Log().size(), 3u);

  // A follower reads the orphans and buffers them: nothing applied.
  auto follower = Replica("b");
  std::vector<Applied> applied;
  Listen(*follower, applied);
  ASSERT_EQ(*follower->CatchUp(), 1);
  EXPECT_EQ(follower->applied_seq(), 1);
  EXPECT_EQ(follower->read_seq(), 3);
  ASSERT_EQ(applied.size(), 1u);  // entry 1
  applied.clear();

  // The next leader recovers (the orphans read, nothing of them applied)
  // and appends after them; the old term can never append again.
  auto next = Replica("c");
  next->set_term(Lead());
  auto recovered = next->LoadAll();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->nodes.size(), 4u);
  auto t = core::Scheduler::Restore(*recovered, kT0);
  ASSERT_TRUE(t.ok()) << t.status();
  // 96 more nodes: split again.
  ASSERT_TRUE((*t)->UpsertNodes(MakeNodes(3, 4, 8, 8, "H200")).ok());
  ASSERT_TRUE(next->Commit((*t)->TakeMutation()).ok());
  const int64_t split_end = next->applied_seq();
  EXPECT_GE(split_end, 5);  // entries 4.. in two parts at least
  ASSERT_TRUE((*t)->Submit(Spec("llm").Pods(1, 1), kT0).ok());
  ASSERT_TRUE(next->Commit((*t)->TakeMutation()).ok());  // whole
  ASSERT_TRUE(s->Submit(Spec("llm").Pods(1, 1), kT0).ok());
  EXPECT_EQ(a->Commit(s->TakeMutation()).code(), absl::StatusCode::kAborted);

  // The follower drops the orphans and applies the new leader's batches
  // right after entry 1 (`after` skips the orphans: no view reset).
  ASSERT_EQ(*follower->CatchUp(), split_end);  // entries 2..split_end+1
  ASSERT_EQ(applied.size(), 2u);
  EXPECT_EQ(applied[0].seq, split_end);
  EXPECT_EQ(applied[0].after, 1);
  EXPECT_EQ(applied[0].nodes, 96u);
  EXPECT_EQ(applied[1].after, split_end);
  ExpectSameState(*next, *follower);
  // So does a replica that reads the whole log from the start.
  auto fresh = Replica("d");
  ASSERT_TRUE(fresh->CatchUp().ok());
  ExpectSameState(*next, *fresh);
  EXPECT_EQ(fresh->LoadAll()->nodes.size(), 96u + 4u);
}

TEST_F(EtcdPartsTest, AWholeEntryAfterAnOrphanPartDropsIt) {
  EtcdStateStoreOptions crashing = Options(kSmallBound);
  crashing.commit_crash_after_parts = 1;
  {
    auto dying = Replica("a", crashing);
    dying->set_term(Lead());
    EXPECT_EQ(dying->Commit(Big(40)->TakeMutation()).code(),
              absl::StatusCode::kAborted);
  }
  ASSERT_EQ(Log().size(), 1u);  // part 0 of several
  auto follower = Replica("b");
  std::vector<Applied> applied;
  Listen(*follower, applied);
  ASSERT_EQ(*follower->CatchUp(), 0);
  EXPECT_EQ(follower->read_seq(), 1);
  // The next leader's first batch is small: one whole entry, seq 2.
  auto next = Replica("c");
  next->set_term(Lead());
  ASSERT_TRUE(next->LoadAll().ok());
  ASSERT_TRUE(next->Commit(Populated()->TakeMutation()).ok());
  EXPECT_EQ(next->applied_seq(), 2);
  EXPECT_EQ(Log().back().parts(), 0);
  ASSERT_EQ(*follower->CatchUp(), 2);
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0].seq, 2);
  EXPECT_EQ(applied[0].after, 0);
  ExpectSameState(*next, *follower);
  EXPECT_EQ(follower->LoadAll()->nodes.size(), 4u);
}

TEST_F(EtcdPartsTest, ASnapshotSplitsARecordLargerThanARequest) {
  auto leader = Replica("a");
  leader->set_term(Lead());
  auto s = Big(0);
  // One gang of 400 pods: its record (placement included) is over 4 KiB.
  ASSERT_TRUE(s->Submit(Spec("llm").Pods(400, 1), kT0).ok());
  s->RunCycle(kT0 + absl::Seconds(1));
  ASSERT_TRUE(leader->Commit(s->TakeMutation()).ok());
  auto snapshot = leader->TakeSnapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_GT(snapshot->chunks, 3);
  EXPECT_EQ(Log().size(), 0u);  // compacted: only the snapshot holds it
  auto fresh = Replica("b");
  ASSERT_TRUE(fresh->CatchUp().ok());
  EXPECT_EQ(fresh->snapshots_loaded(), 1);
  ExpectSameState(*leader, *fresh);
  auto gang = fresh->LoadAll()->gangs;
  ASSERT_EQ(gang.size(), 1u);
  EXPECT_EQ(gang[0].placement.size(), 400u);
}

}  // namespace
}  // namespace phalanx::storage::etcd
