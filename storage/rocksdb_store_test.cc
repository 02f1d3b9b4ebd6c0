#include "storage/rocksdb_store.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/scheduler.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "phalanx/storage/v1/log.pb.h"
#include "proto/convert.h"
#include "proto/log_convert.h"
#include "storage/store_testing.h"

namespace phalanx::storage {
namespace {

using core::testing::MakeNodes;
using core::testing::Spec;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

class RocksDbStoreTest : public ::testing::Test {
 protected:
  RocksDbStoreTest() {
    char pattern[] = "/tmp/phalanx-store-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  ~RocksDbStoreTest() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<RocksDbStore> OpenStore() {
    auto store = RocksDbStore::Open(dir_);
    EXPECT_TRUE(store.ok()) << store.status();
    return std::move(*store);
  }

  // A scheduler with 4 nodes, queue "llm", one admitted 2-pod gang, and
  // non-default limits.
  static std::unique_ptr<core::Scheduler> Populated() {
    core::Config config;
    config.topology_levels = {"block", "rack"};
    config.limits.max_labels = 7;  // non-default limits persist too
    config.limits.max_pending_gangs_per_queue = 9;
    config.limits.requests_per_second = 12.5;
    auto s = std::make_unique<core::Scheduler>(config);
    EXPECT_TRUE(s->UpsertNodes(MakeNodes(1, 2, 2)).ok());
    core::Queue queue;
    queue.name = core::QueueName("llm");
    EXPECT_TRUE(s->PutQueue(queue).ok());
    EXPECT_TRUE(s->Submit(Spec("llm").Pods(2, 8).RequestId("r1"), kT0).ok());
    s->RunCycle(kT0 + absl::Seconds(1));
    return s;
  }

  std::string dir_;
};

TEST_F(RocksDbStoreTest, CommitThenLoadRestoresTheSameScheduler) {
  auto original = Populated();
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Commit(original->TakeMutation()).ok());
  }
  auto store = OpenStore();
  auto state = store->LoadAll();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->nodes.size(), 4u);
  EXPECT_EQ(state->queues.size(), 1u);
  ASSERT_EQ(state->gangs.size(), 1u);
  EXPECT_EQ(state->gangs[0], *original->FindGang(core::GangId("g-000001")));
  EXPECT_EQ(state->requests.size(), 1u);
  EXPECT_EQ(state->meta.last_revision, 2);
  EXPECT_EQ(*state->config, original->config());
  auto restored = core::Scheduler::Restore(*state, kT0);
  ASSERT_TRUE(restored.ok()) << restored.status();
}

TEST_F(RocksDbStoreTest, EveryCommitSyncsTheWal) {
  auto store = OpenStore();
  auto s = Populated();
  const uint64_t before = store->WalSyncs();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(s->Submit(Spec("llm").Pods(1, 1), kT0).ok());
    ASSERT_TRUE(store->Commit(s->TakeMutation()).ok());
  }
  EXPECT_GE(store->WalSyncs() - before, 5u);
}

TEST_F(RocksDbStoreTest, EventsReadInOrderAndTrimmedOnesAreOutOfRange) {
  auto store = OpenStore();
  core::Mutation m;
  for (int64_t r = 1; r <= 300; ++r) {
    m.events.push_back(
        core::Event{r, core::EventType::kSubmitted, kT0, nullptr});
  }
  m.meta.last_revision = 300;
  ASSERT_TRUE(store->Commit(m).ok());
  auto events = store->ReadEvents(255, 10);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 10u);
  EXPECT_EQ((*events)[0].revision, 256);
  EXPECT_EQ((*events)[9].revision, 265);

  core::Mutation trim;
  trim.trim_events_before = 200;
  trim.meta = m.meta;
  trim.meta.first_retained_revision = 200;
  ASSERT_TRUE(store->Commit(trim).ok());
  EXPECT_EQ(store->ReadEvents(150, 10).status().code(),
            absl::StatusCode::kOutOfRange);
  auto from = store->ReadEvents(199, 1);
  ASSERT_TRUE(from.ok());
  EXPECT_EQ((*from)[0].revision, 200);
}

// A batch's events carrying a gang it also stores reuse the gang's bytes:
// every event still reads back with its own gang exactly.
TEST_F(RocksDbStoreTest, EventsReadBackWithTheirGangs) {
  auto scheduler = Populated();  // submitted, then admitted: two versions
  const core::Mutation m = scheduler->TakeMutation();
  ASSERT_FALSE(m.gangs_put.empty());
  int sharing = 0;  // events whose gang is one the batch stores
  for (const core::Event& event : m.events) {
    for (const core::GangPtr& gang : m.gangs_put) sharing += event.gang == gang;
  }
  ASSERT_GE(sharing, 1);
  ASSERT_GT(static_cast<int>(m.events.size()), sharing);  // and one that isn't
  auto store = OpenStore();
  ASSERT_TRUE(store->Commit(m).ok());
  auto events = store->ReadEvents(0, 100);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), m.events.size());
  for (size_t i = 0; i < m.events.size(); ++i) {
    phalanx::v1::GangEvent want, got;
    convert::ToProto(m.events[i], &want);
    convert::ToProto((*events)[i], &got);
    EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString()) << i;
    EXPECT_TRUE(got.has_gang()) << i;
  }
}

TEST(EventKeyTest, SortsByRevision) {
  EXPECT_LT(EventKey(255), EventKey(256));
  EXPECT_LT(EventKey(1), EventKey(1ll << 40));
}

TEST_F(RocksDbStoreTest, CleanCloseFlushesSoReopenReplaysNoWal) {
  auto original = Populated();
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Commit(original->TakeMutation()).ok());
  }
  // The commit is in a table file, not only in the WAL.
  int tables = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    tables += entry.path().extension() == ".sst" ? 1 : 0;
  }
  EXPECT_GT(tables, 0);
  auto state = OpenStore()->LoadAll();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->gangs.size(), 1u);
}

void SetRawSchemaVersion(const std::string& dir, const std::string& version) {
  absl::Status s = testing::SetRawSchemaVersion(dir, version);
  ASSERT_TRUE(s.ok()) << s;
}

TEST_F(RocksDbStoreTest, NewDataDirRecordsTheCurrentSchemaVersion) {
  EXPECT_EQ(OpenStore()->opened_schema_version(), 0);
  EXPECT_EQ(OpenStore()->opened_schema_version(), RocksDbStore::kSchemaVersion);
  EXPECT_EQ(RocksDbStore::kSchemaVersion, 2);
}

TEST_F(RocksDbStoreTest, DataDirOfThePreviousReleaseIsMigrated) {
  auto original = Populated();
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Commit(original->TakeMutation()).ok());
  }
  // The release before schema versions wrote no version key.
  SetRawSchemaVersion(dir_, "");
  {
    auto store = OpenStore();
    EXPECT_EQ(store->opened_schema_version(), 1);
    auto state = store->LoadAll();
    ASSERT_TRUE(state.ok()) << state.status();
    EXPECT_EQ(state->gangs.size(), 1u);
    EXPECT_EQ(state->meta.last_revision, 2);
  }
  // Migrated once: the version is on disk.
  EXPECT_EQ(OpenStore()->opened_schema_version(), RocksDbStore::kSchemaVersion);
}

TEST_F(RocksDbStoreTest, NewerSchemaVersionIsRefused) {
  { OpenStore(); }
  SetRawSchemaVersion(dir_, "7");
  auto store = RocksDbStore::Open(dir_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.status().message(),
            "data dir schema version 7 is newer than this phalanxd supports "
            "(2); upgrade phalanxd");
  // Refusing changed nothing.
  EXPECT_FALSE(RocksDbStore::Open(dir_).ok());
}

TEST_F(RocksDbStoreTest, UnreadableSchemaVersionIsDataLoss) {
  { OpenStore(); }
  SetRawSchemaVersion(dir_, "two");
  EXPECT_EQ(RocksDbStore::Open(dir_).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(RocksDbStoreTest, CheckpointHoldsExactlyTheCommittedRevision) {
  auto s = Populated();
  auto store = OpenStore();
  ASSERT_TRUE(store->Commit(s->TakeMutation()).ok());
  ASSERT_TRUE(s->Submit(Spec("llm").Pods(1, 1), kT0).ok());
  ASSERT_TRUE(store->Commit(s->TakeMutation()).ok());
  const std::string backup = dir_ + "-backup";
  auto revision = store->CreateCheckpoint(backup);
  ASSERT_TRUE(revision.ok()) << revision.status();
  EXPECT_EQ(*revision, s->revision());
  // Later commits stay out of the checkpoint.
  ASSERT_TRUE(s->Submit(Spec("llm").Pods(1, 1), kT0).ok());
  ASSERT_TRUE(store->Commit(s->TakeMutation()).ok());
  ASSERT_GT(s->revision(), *revision);
  {
    auto restored = RocksDbStore::Open(backup);
    ASSERT_TRUE(restored.ok()) << restored.status();
    auto state = (*restored)->LoadAll();
    ASSERT_TRUE(state.ok()) << state.status();
    EXPECT_EQ(state->meta.last_revision, *revision);
    EXPECT_EQ(state->gangs.size(), 2u);
    EXPECT_TRUE(core::Scheduler::Restore(*state, kT0).ok());
  }
  std::filesystem::remove_all(backup);
}

TEST_F(RocksDbStoreTest, CheckpointDirectoryRules) {
  auto store = OpenStore();
  EXPECT_EQ(store->CreateCheckpoint("relative/dir").status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string full = dir_ + "-full";
  std::filesystem::create_directories(full + "/x");
  EXPECT_EQ(store->CreateCheckpoint(full).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(std::filesystem::exists(full + "/x"));  // left alone
  EXPECT_EQ(store->CreateCheckpoint(dir_ + "-missing/parent/b").status().code(),
            absl::StatusCode::kFailedPrecondition);
  // An empty directory is fine.
  const std::string empty = dir_ + "-empty";
  std::filesystem::create_directories(empty);
  EXPECT_TRUE(store->CreateCheckpoint(empty).ok());
  EXPECT_TRUE(std::filesystem::exists(empty + "/CURRENT"));
  std::filesystem::remove_all(full);
  std::filesystem::remove_all(empty);
}

TEST_F(RocksDbStoreTest, AppliedLogSeqIsKeptWithItsBatch) {
  {
    auto store = OpenStore();
    EXPECT_EQ(*store->LogSeq(), 0);
    ASSERT_TRUE(store->ApplyLogBatch(Populated()->TakeMutation(), 300).ok());
    // A plain commit leaves the applied seq alone.
    ASSERT_TRUE(store->Commit(core::Mutation{}).ok());
  }
  auto store = OpenStore();
  EXPECT_EQ(*store->LogSeq(), 300);
  EXPECT_EQ(store->LoadAll()->gangs.size(), 1u);
}

TEST_F(RocksDbStoreTest, StartupFileHashesLastUntilABatchReplacesThem) {
  {
    auto store = OpenStore();
    EXPECT_EQ(store->LoadAll()->startup_files, core::StartupFileHashes{});
    core::Mutation applied = Populated()->TakeMutation();
    applied.startup_files = core::StartupFileHashes{"c1", "f1", "q1"};
    ASSERT_TRUE(store->Commit(applied).ok());
    // A batch without them leaves them alone.
    ASSERT_TRUE(store->Commit(core::Mutation{}).ok());
  }
  auto store = OpenStore();
  EXPECT_EQ(store->LoadAll()->startup_files,
            (core::StartupFileHashes{"c1", "f1", "q1"}));
  core::Mutation next;
  next.startup_files = core::StartupFileHashes{"c1", "f1", "q2"};
  EXPECT_FALSE(next.empty());
  ASSERT_TRUE(store->Commit(next).ok());
  EXPECT_EQ(store->LoadAll()->startup_files.queues, "q2");
}

TEST_F(RocksDbStoreTest, AFrozenStateLoadsAsItWasWhenFrozen) {
  auto s = Populated();
  auto store = OpenStore();
  ASSERT_TRUE(store->ApplyLogBatch(s->TakeMutation(), 7).ok());
  const core::LoadedState before = *store->LoadAll();
  auto frozen = store->Freeze();
  ASSERT_TRUE(frozen.ok()) << frozen.status();
  ASSERT_TRUE(s->Submit(Spec("llm").Pods(1, 1).RequestId("r2"), kT0).ok());
  ASSERT_TRUE(store->ApplyLogBatch(s->TakeMutation(), 8).ok());
  ASSERT_GT(store->LoadAll()->gangs.size(), before.gangs.size());

  absl::StatusOr<core::LoadedState> loaded = (*frozen)->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->nodes, before.nodes);
  EXPECT_EQ(loaded->queues, before.queues);
  EXPECT_EQ(loaded->gangs, before.gangs);
  EXPECT_EQ(loaded->config, before.config);
  EXPECT_EQ(loaded->meta, before.meta);
  EXPECT_EQ(loaded->requests.size(), before.requests.size());
  EXPECT_EQ(loaded->ledger.size(), before.ledger.size());
}

TEST_F(RocksDbStoreTest, FrozenStateReplacesAnotherStoreWhole) {
  auto s = Populated();
  auto store = OpenStore();
  core::Mutation first = s->TakeMutation();
  first.startup_files = core::StartupFileHashes{"aa", "bb", "cc"};
  ASSERT_TRUE(store->ApplyLogBatch(first, 7).ok());
  const core::LoadedState before = *store->LoadAll();
  const size_t events_before = store->ReadEvents(0, 100)->size();
  auto frozen = store->Freeze();
  ASSERT_TRUE(frozen.ok()) << frozen.status();
  EXPECT_EQ((*frozen)->log_seq(), 7);
  // Commits after the freeze are not in the frozen view.
  ASSERT_TRUE(s->Submit(Spec("llm").Pods(1, 1).RequestId("r2"), kT0).ok());
  ASSERT_TRUE(store->ApplyLogBatch(s->TakeMutation(), 8).ok());

  // Parts of at most ~300 bytes: several.
  std::vector<core::Mutation> parts;
  ASSERT_TRUE((*frozen)
                  ->Export(300,
                           [&](storage::v1::LogBatch& part) -> absl::Status {
                             EXPECT_EQ(part.seq(), 7);
                             auto m = convert::MutationFromProto(part);
                             if (!m.ok()) return m.status();
                             parts.push_back(std::move(*m));
                             return absl::OkStatus();
                           })
                  .ok());
  EXPECT_GT(parts.size(), 3u);

  // Another store holding other records: every one of them goes.
  char pattern[] = "/tmp/phalanx-store-XXXXXX";
  const std::string other_dir = mkdtemp(pattern);
  {
    auto other = std::move(*RocksDbStore::Open(other_dir));
    core::Scheduler t(core::Config{});
    ASSERT_TRUE(t.UpsertNodes(MakeNodes(2, 1, 1, 4, "A100")).ok());
    core::Queue queue;
    queue.name = core::QueueName("other");
    ASSERT_TRUE(t.PutQueue(queue).ok());
    ASSERT_TRUE(t.Submit(Spec("other").Pods(1, 1).RequestId("x"), kT0).ok());
    core::Mutation other_first = t.TakeMutation();
    other_first.startup_files = core::StartupFileHashes{"", "dd", ""};
    ASSERT_TRUE(other->ApplyLogBatch(other_first, 3).ok());
    size_t next = 0;
    // A failing source writes nothing.
    EXPECT_EQ(other
                  ->ReplaceAll(
                      []() -> absl::StatusOr<std::optional<core::Mutation>> {
                        return absl::DataLossError("chunk missing");
                      },
                      7)
                  .code(),
              absl::StatusCode::kDataLoss);
    EXPECT_EQ(*other->LogSeq(), 3);
    ASSERT_TRUE(other
                    ->ReplaceAll(
                        [&]() -> absl::StatusOr<std::optional<core::Mutation>> {
                          if (next == parts.size()) return std::nullopt;
                          return std::optional<core::Mutation>(parts[next++]);
                        },
                        7)
                    .ok());
  }
  auto other = std::move(*RocksDbStore::Open(other_dir));
  EXPECT_EQ(other->opened_schema_version(), RocksDbStore::kSchemaVersion);
  EXPECT_EQ(*other->LogSeq(), 7);
  const core::LoadedState after = *other->LoadAll();
  EXPECT_EQ(after.nodes, before.nodes);
  EXPECT_EQ(after.queues, before.queues);
  EXPECT_EQ(after.gangs, before.gangs);
  EXPECT_EQ(after.config, before.config);
  EXPECT_EQ(after.meta, before.meta);
  EXPECT_EQ(after.startup_files, before.startup_files);
  EXPECT_EQ(after.startup_files.fleet, "bb");
  ASSERT_EQ(after.requests.size(), 1u);
  EXPECT_EQ(after.requests[0].request_id, "r1");
  auto events = other->ReadEvents(0, 100);
  ASSERT_TRUE(events.ok());
  EXPECT_GT(events_before, 0u);
  EXPECT_EQ(events->size(), events_before);
  other.reset();
  std::filesystem::remove_all(other_dir);
}

}  // namespace
}  // namespace phalanx::storage
