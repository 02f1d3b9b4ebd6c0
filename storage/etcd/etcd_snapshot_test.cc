// EtcdStateStore's snapshots and log compaction (docs/ha.md, "Snapshots and
// compaction") against a real 3-member etcd cluster (tests/etcd_cluster.h)
// and real RocksDB replicas in temporary directories. The leader key is put
// by hand, as in etcd_state_store_test.cc.
#include <memory>
#include <string>
#include <vector>

#include "core/scheduler.h"
#include "core/testing.h"
#include "gtest/gtest.h"
#include "storage/etcd/etcd_state_store.h"
#include "storage/etcd/store_testing.h"
#include "tests/etcd_cluster.h"
#include "tests/etcd_fixture.h"

namespace phalanx::storage::etcd {
namespace {

using core::testing::MakeNodes;
using core::testing::Spec;
using ::phalanx::storage::etcd::testing::ExpectSameState;
using ::phalanx::testing::EtcdCluster;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);
constexpr char kPrefix[] = "/phalanx/snap";

class EtcdSnapshotTest : public ::phalanx::testing::EtcdClusterTest {
 protected:
  // Options with small chunks (several per snapshot) and no automatic
  // snapshots.
  static EtcdStateStoreOptions Small(const std::string& id) {
    EtcdStateStoreOptions options;
    options.prefix = kPrefix;
    options.replica_id = id;
    options.snapshot_every_entries = 0;
    options.snapshot_every_bytes = 0;
    options.snapshot_chunk_bytes = 2048;
    options.applied_interval = absl::ZeroDuration();
    return options;
  }

  // A replica whose RocksDB lives in `cluster_->root()/name`.
  std::unique_ptr<EtcdStateStore> Replica(const std::string& name,
                                          EtcdStateStoreOptions options) {
    return testing::OpenReplica(client_.get(), cluster_->root() + "/" + name,
                                std::move(options));
  }
  std::unique_ptr<EtcdStateStore> Replica(const std::string& name) {
    return Replica(name, Small(name));
  }

  // (Re)creates the leader key; returns its create revision (a new term).
  int64_t Lead() { return testing::Lead(client_.get(), kPrefix); }

  // Keys under PREFIX/`what`/.
  std::vector<std::string> Keys(const std::string& what) {
    epb::RangeRequest range;
    range.set_key(std::string(kPrefix) + "/" + what + "/");
    range.set_range_end(PrefixEnd(range.key()));
    range.set_keys_only(true);
    std::vector<std::string> keys;
    absl::StatusOr<epb::RangeResponse> response = client_->Range(range);
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return keys;
    for (const auto& kv : response->kvs()) keys.push_back(kv.key());
    return keys;
  }
  int Count(const std::string& what) {
    return static_cast<int>(Keys(what).size());
  }

  // Commits `n` batches of one submitted gang each (and a cycle every
  // third, so gangs are admitted and events written).
  void CommitGangs(core::Scheduler& s, EtcdStateStore& store, int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(s.Submit(Spec("llm").Pods(1, 1).RequestId(
                               "r" + std::to_string(next_request_++)),
                           kT0)
                      .ok());
      if (i % 3 == 0) s.RunCycle(kT0 + absl::Seconds(next_request_));
      ASSERT_TRUE(store.Commit(s.TakeMutation()).ok());
    }
  }

  int next_request_ = 0;
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

TEST_F(EtcdSnapshotTest, SnapshotsAndCompactionKeepTheLogBounded) {
  EtcdStateStoreOptions options = Small("a");
  options.snapshot_every_entries = 10;
  auto leader = Replica("a", options);
  leader->set_term(Lead());
  ASSERT_TRUE(leader->LoadAll().ok());
  auto s = Populated();
  int snapshots = 0;
  for (int i = 0; i < 120; ++i) {
    CommitGangs(*s, *leader, 1);
    absl::StatusOr<SnapshotInfo> info = leader->WaitForSnapshot();
    if (info.status().code() != absl::StatusCode::kNotFound) {
      ASSERT_TRUE(info.ok()) << info.status();
      ++snapshots;
      EXPECT_EQ(info->seq, leader->applied_seq());
      EXPECT_EQ(info->log_deleted_through, info->seq);
      EXPECT_GT(info->chunks, 1);
    }
    // Never more than a snapshot's worth of entries, one manifest, and the
    // chunks of that one snapshot only.
    ASSERT_LE(Count("log"), 10) << "after commit " << i;
    ASSERT_LE(Count("manifest"), 1);
  }
  EXPECT_EQ(snapshots, 12);
  EXPECT_EQ(Count("log"), 0);
  for (const std::string& key : Keys("snapshot")) {
    EXPECT_NE(key.find("/snapshot/00000000000000000120/"), std::string::npos)
        << key;
  }
  // etcd's history was compacted: the first revisions cannot be read.
  epb::RangeRequest old;
  old.set_key(std::string(kPrefix) + "/log/");
  old.set_revision(2);
  EXPECT_EQ(client_->Range(old).status().code(), absl::StatusCode::kOutOfRange);

  auto fresh = Replica("b");
  ExpectSameState(*leader, *fresh);
  EXPECT_EQ(fresh->snapshots_loaded(), 1);
}

TEST_F(EtcdSnapshotTest, AnEmptyReplicaCatchesUpFromSnapshotAndLog) {
  auto leader = Replica("a");
  leader->set_term(Lead());
  auto s = Populated();
  CommitGangs(*s, *leader, 30);
  absl::StatusOr<SnapshotInfo> info = leader->TakeSnapshot();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->seq, 30);
  EXPECT_GT(info->chunks, 2);
  EXPECT_EQ(Count("log"), 0);
  CommitGangs(*s, *leader, 5);
  EXPECT_EQ(Count("log"), 5);

  auto fresh = Replica("b");
  absl::StatusOr<int64_t> applied = fresh->CatchUp();
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(fresh->snapshots_loaded(), 1);
  EXPECT_EQ(fresh->applied_seq(), 35);
  ExpectSameState(*leader, *fresh);
  auto state = fresh->LoadAll();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->gangs.size(), 35u);
  EXPECT_TRUE(core::Scheduler::Restore(*state, kT0).ok());

  // The leader's next entries reach it through the log, not a snapshot.
  CommitGangs(*s, *leader, 2);
  EXPECT_EQ(*fresh->CatchUp(), 2);
  EXPECT_EQ(fresh->snapshots_loaded(), 1);
  ExpectSameState(*leader, *fresh);
}

TEST_F(EtcdSnapshotTest, AReplicaWithStateIsReplacedWholeBySnapshot) {
  auto leader = Replica("a");
  leader->set_term(Lead());
  auto s = Populated();
  CommitGangs(*s, *leader, 4);
  auto behind = Replica("b");
  ASSERT_EQ(*behind->CatchUp(), 4);
  behind.reset();
  CommitGangs(*s, *leader, 20);
  // Its applied key would hold the log back until its lease expires: delete
  // it by hand as that expiry would (a later test waits for a real one).
  epb::DeleteRangeRequest del;
  del.set_key(leader->AppliedKey("b"));
  ASSERT_TRUE(client_->DeleteRange(del).ok());
  ASSERT_TRUE(leader->TakeSnapshot().ok());
  behind = Replica("b");
  ASSERT_TRUE(behind->CatchUp().ok());
  EXPECT_EQ(behind->snapshots_loaded(), 1);
  ExpectSameState(*leader, *behind);
}

TEST_F(EtcdSnapshotTest, ADeposedLeaderCannotPublishASnapshot) {
  auto leader = Replica("a");
  leader->set_term(Lead());
  auto s = Populated();
  CommitGangs(*s, *leader, 10);
  Lead();  // another replica wins a later term
  absl::StatusOr<SnapshotInfo> info = leader->TakeSnapshot();
  EXPECT_EQ(info.status().code(), absl::StatusCode::kAborted) << info.status();
  EXPECT_EQ(Count("manifest"), 0);
  EXPECT_EQ(Count("snapshot"), 0);
  EXPECT_EQ(Count("log"), 10);  // nothing compacted
}

TEST_F(EtcdSnapshotTest, ACrashBetweenChunksLeavesNoManifest) {
  const int64_t term = Lead();
  auto s = Populated();
  {
    auto leader = Replica("a");
    leader->set_term(term);
    CommitGangs(*s, *leader, 20);
    ASSERT_TRUE(leader->TakeSnapshot().ok());  // complete, at 20
    CommitGangs(*s, *leader, 20);
  }
  EtcdStateStoreOptions crashing = Small("a");
  crashing.snapshot_crash_after_chunks = 2;
  {
    auto leader = Replica("a", crashing);
    leader->set_term(term);
    absl::StatusOr<SnapshotInfo> info = leader->TakeSnapshot();
    ASSERT_EQ(info.status().code(), absl::StatusCode::kAborted)
        << info.status();
  }
  // Two chunks of the snapshot at 40, no manifest for it; nothing deleted.
  const std::vector<std::string> manifests = Keys("manifest");
  ASSERT_EQ(manifests.size(), 1u);
  EXPECT_NE(manifests[0].find("/manifest/00000000000000000020"),
            std::string::npos);
  int partial = 0;
  for (const std::string& key : Keys("snapshot")) {
    partial += key.find("/snapshot/00000000000000000040/") != std::string::npos;
  }
  EXPECT_EQ(partial, 2);
  EXPECT_EQ(Count("log"), 20);

  // A new replica ignores the partial snapshot: the one at 20, then 21..40.
  auto leader = Replica("a");
  leader->set_term(term);
  auto fresh = Replica("b");
  ASSERT_TRUE(fresh->CatchUp().ok());
  EXPECT_EQ(fresh->snapshots_loaded(), 1);
  EXPECT_EQ(fresh->applied_seq(), 40);
  ExpectSameState(*leader, *fresh);

  // The next snapshot at 40 replaces the partial one and drops the old.
  absl::StatusOr<SnapshotInfo> info = leader->TakeSnapshot();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(Count("manifest"), 1);
  for (const std::string& key : Keys("snapshot")) {
    EXPECT_NE(key.find("/snapshot/00000000000000000040/"), std::string::npos);
  }
  EXPECT_EQ(Count("snapshot"), info->chunks);
}

TEST_F(EtcdSnapshotTest, ALaggingReplicaHoldsTheLogBackUntilItsLeaseExpires) {
  auto leader = Replica("a");
  leader->set_term(Lead());
  auto s = Populated();
  CommitGangs(*s, *leader, 5);
  EtcdStateStoreOptions lagging = Small("b");
  lagging.applied_ttl = absl::Seconds(2);
  {
    auto b = Replica("b", lagging);
    ASSERT_EQ(*b->CatchUp(), 5);  // publishes 5
    ASSERT_EQ(Count("applied"), 1);
  }  // b stops without revoking: as if it hung or crashed
  CommitGangs(*s, *leader, 20);
  absl::StatusOr<SnapshotInfo> info = leader->TakeSnapshot();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->seq, 25);
  EXPECT_EQ(info->log_deleted_through, 5);
  EXPECT_EQ(Count("log"), 20);  // 6..25 kept for b

  // Once b's lease expires (bounded wait: 2 s TTL, 30 s at most), the next
  // snapshot's compaction no longer waits for it.
  for (int i = 0; i < 300 && Count("applied") > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(Count("applied"), 0);
  info = leader->TakeSnapshot();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->log_deleted_through, 25);
  EXPECT_EQ(Count("log"), 0);

  // b comes back below the log's first entry: snapshot, then log.
  auto b = Replica("b", lagging);
  CommitGangs(*s, *leader, 3);
  ASSERT_TRUE(b->CatchUp().ok());
  EXPECT_EQ(b->snapshots_loaded(), 1);
  EXPECT_EQ(b->applied_seq(), 28);
  ExpectSameState(*leader, *b);
}

TEST_F(EtcdSnapshotTest, AReplicaBehindACompactedLogCannotAppend) {
  const int64_t term = Lead();
  auto leader = Replica("a");
  leader->set_term(term);
  auto s = Populated();
  CommitGangs(*s, *leader, 10);
  ASSERT_TRUE(leader->TakeSnapshot().ok());
  ASSERT_EQ(Count("log"), 0);  // entries 1..10 are gone
  // b holds the term but has applied nothing: entry 1 is free in etcd, yet
  // b must not append it (a fork of the log).
  auto b = Replica("b");
  b->set_term(term);
  auto t = Populated();
  const absl::Status refused = b->Commit(t->TakeMutation());
  EXPECT_EQ(refused.code(), absl::StatusCode::kAborted) << refused;
  EXPECT_EQ(Count("log"), 0);
  CommitGangs(*s, *leader, 1);  // the leader goes on at 11
  EXPECT_EQ(leader->applied_seq(), 11);
  EXPECT_EQ(Keys("log").size(), 1u);
}

TEST_F(EtcdSnapshotTest, CatchUpWithoutASnapshotAfterAGapIsDataLoss) {
  auto leader = Replica("a");
  leader->set_term(Lead());
  auto s = Populated();
  CommitGangs(*s, *leader, 3);
  epb::DeleteRangeRequest del;  // an operator deleted entry 1 by hand
  del.set_key(leader->LogKey(1));
  ASSERT_TRUE(client_->DeleteRange(del).ok());
  auto fresh = Replica("b");
  EXPECT_EQ(fresh->CatchUp().status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(fresh->applied_seq(), 0);
}

}  // namespace
}  // namespace phalanx::storage::etcd
