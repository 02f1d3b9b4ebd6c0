// RocksDbStore on a full, failing or slow disk (storage/fault_fs.h): a write
// refused for lack of space writes nothing and the store resumes once space
// is free; opened on a full disk, the store reads and freezes read-only
// (also a data dir of the schema before the audit family) and reopens
// read-write once space is free, its frozen views still valid; another I/O
// error is Internal; a commit waits for its sync.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/scheduler.h"
#include "core/testing.h"
#include "gtest/gtest.h"
#include "phalanx/storage/v1/log.pb.h"
#include "storage/fault_fs.h"
#include "storage/rocksdb_store.h"
#include "storage/store_check.h"
#include "storage/store_testing.h"

namespace phalanx::storage {
namespace {

using core::testing::kT0;
using core::testing::MakeNodes;
using core::testing::Spec;

class DiskFaultTest : public ::testing::Test {
 protected:
  DiskFaultTest()
      : fs_(std::make_shared<FaultFs>(rocksdb::FileSystem::Default())),
        env_(NewFaultEnv(fs_)) {
    char pattern[] = "/tmp/phalanx-disk-fault-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  ~DiskFaultTest() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<RocksDbStore> OpenStore() {
    RocksDbStore::Options options;
    options.env = env_.get();
    auto store = RocksDbStore::Open(dir_, options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // A scheduler with 4 nodes of 8 GPUs and queue "llm", its state taken.
  static std::unique_ptr<core::Scheduler> Fleet() {
    auto s = std::make_unique<core::Scheduler>(core::Config());
    EXPECT_TRUE(s->UpsertNodes(MakeNodes(1, 2, 2)).ok());
    core::Queue queue;
    queue.name = core::QueueName("llm");
    EXPECT_TRUE(s->PutQueue(queue).ok());
    return s;
  }

  // Submits gang request `request_id` and runs a cycle; the batch.
  static core::Mutation SubmitAndCycle(core::Scheduler& s,
                                       const std::string& request_id) {
    EXPECT_TRUE(
        s.Submit(Spec("llm").Pods(1, 8).RequestId(request_id), kT0).ok());
    s.RunCycle(kT0);
    return s.TakeMutation();
  }

  // Stores `s`'s state and its first gang ("r1") with space to spare, and
  // closes the store.
  void StoreFleetAndFirstGang(core::Scheduler& s) {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Commit(s.TakeMutation()).ok());
    ASSERT_TRUE(store->Commit(SubmitAndCycle(s, "r1")).ok());
  }

  std::shared_ptr<FaultFs> fs_;
  std::unique_ptr<rocksdb::Env> env_;
  std::string dir_;
};

TEST_F(DiskFaultTest, FullDiskRefusesTheWriteAndResumesOnceSpaceIsFree) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto scheduler = Fleet();
  ASSERT_TRUE(store->Commit(scheduler->TakeMutation()).ok());
  const core::Mutation first = SubmitAndCycle(*scheduler, "r1");

  fs_->SetNoSpace(true);
  absl::Status refused = store->Commit(first);
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_NE(refused.message().find(dir_), std::string::npos) << refused;
  // Still full: a retry is refused again, and nothing was written.
  EXPECT_TRUE(absl::IsResourceExhausted(store->Commit(first)));
  auto state = store->LoadAll();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(state->gangs.empty());

  // Space is free: RocksDB may be recovering by itself meanwhile (its
  // Resume then reports Busy), so the commit is retried as the scheduler
  // loop does, for at most 30 s.
  fs_->SetNoSpace(false);
  const absl::Time healed_at = absl::Now();
  absl::Status healed = store->Commit(first);
  for (int i = 0; i < 300 && !healed.ok(); ++i) {
    EXPECT_TRUE(absl::IsResourceExhausted(healed)) << healed;
    absl::SleepFor(absl::Milliseconds(100));
    healed = store->Commit(first);
  }
  ASSERT_TRUE(healed.ok()) << healed;
  std::printf("committed %s after space was freed\n",
              absl::FormatDuration(absl::Now() - healed_at).c_str());
  ASSERT_TRUE(store->Commit(SubmitAndCycle(*scheduler, "r2")).ok());
  store.reset();

  // Reopened: both batches, each once, and the store passes its check
  // (which restores the state into a scheduler too).
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  state = store->LoadAll();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->gangs.size(), 2u);
  EXPECT_EQ(state->requests.size(), 2u);
  EXPECT_EQ(state->meta.last_revision, scheduler->revision());
  const absl::Status consistent = store->CheckConsistency();
  EXPECT_TRUE(consistent.ok()) << consistent;
}

// Opened on a full disk, the store is read-only: it loads, freezes and
// passes its check, and holds the data dir's lock; writes are refused. The
// first write once space is free reopens it read-write, and a view frozen
// before keeps reading the state it was frozen with.
TEST_F(DiskFaultTest, AStoreOpenedOnAFullDiskReadsFreezesAndReopens) {
  auto scheduler = Fleet();
  ASSERT_NO_FATAL_FAILURE(StoreFleetAndFirstGang(*scheduler));
  fs_->SetNoSpace(true);
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const core::Mutation second = SubmitAndCycle(*scheduler, "r2");
  EXPECT_TRUE(absl::IsResourceExhausted(store->Commit(second)));
  auto frozen = store->Freeze();
  ASSERT_TRUE(frozen.ok()) << frozen.status();
  auto state = (*frozen)->Load();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->gangs.size(), 1u);
  const absl::Status consistent = store->CheckConsistency();
  EXPECT_TRUE(consistent.ok()) << consistent;
  // It holds the data dir's lock as a writer would: `--check-store` is
  // refused, before the reopen and after.
  EXPECT_EQ(CheckStoreConsistency(dir_, env_.get()).code(),
            absl::StatusCode::kFailedPrecondition);

  fs_->SetNoSpace(false);
  ASSERT_TRUE(store->Commit(second).ok());
  ASSERT_TRUE(store->Commit(SubmitAndCycle(*scheduler, "r3")).ok());
  EXPECT_EQ(CheckStoreConsistency(dir_, env_.get()).code(),
            absl::StatusCode::kFailedPrecondition);
  state = (*frozen)->Load();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->gangs.size(), 1u);
  frozen->reset();  // closes the read-only instance
  auto now = store->Freeze();
  ASSERT_TRUE(now.ok()) << now.status();
  state = (*now)->Load();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->gangs.size(), 3u);
  EXPECT_EQ(state->meta.last_revision, scheduler->revision());
}

// A read-only store opens no table file after its open (it opened them all
// then and replayed its WAL into memory), so the read-write instance that
// replaces it may delete them under a view frozen before: here every table
// file is moved away under the read-only store and its view, which read on.
TEST_F(DiskFaultTest, AReadOnlyStoreReadsOnWithItsTableFilesGone) {
  auto scheduler = Fleet();
  core::Mutation fleet = scheduler->TakeMutation();
  for (const std::string request_id : {"r1", "r2"}) {
    auto store = OpenStore();  // each close flushes: the state is in tables
    ASSERT_NE(store, nullptr);
    if (!fleet.empty()) {
      ASSERT_TRUE(store->Commit(std::exchange(fleet, {})).ok());
    }
    ASSERT_TRUE(store->Commit(SubmitAndCycle(*scheduler, request_id)).ok());
  }
  fs_->SetNoSpace(true);
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto frozen = store->Freeze();
  ASSERT_TRUE(frozen.ok()) << frozen.status();
  const std::string aside = dir_ + "-aside";
  std::filesystem::create_directory(aside);
  std::vector<std::string> moved;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    if (entry.path().extension() == ".sst") {
      moved.push_back(entry.path().filename());
      std::filesystem::rename(entry.path(), aside + "/" + moved.back());
    }
  }
  EXPECT_GE(moved.size(), 4u);
  auto state = (*frozen)->Load();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->gangs.size(), 2u);
  EXPECT_EQ(state->nodes.size(), 4u);
  state = store->LoadAll();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->gangs.size(), 2u);
  for (const std::string& name : moved) {
    std::filesystem::rename(aside + "/" + name, dir_ + "/" + name);
  }
  std::filesystem::remove_all(aside);
}

// A data dir of the schema before the audit family (version 1, no `audit`
// column family) opened on a full disk: read-only with the audit family
// read as empty; once space is free the first write creates the family,
// lands its audit record there and records the current schema version.
TEST_F(DiskFaultTest, AnOlderSchemaOpenedOnAFullDiskReadsAndMigratesLater) {
  auto scheduler = Fleet();
  ASSERT_NO_FATAL_FAILURE(StoreFleetAndFirstGang(*scheduler));
  ASSERT_TRUE(testing::SetRawSchemaVersion(dir_, "").ok());
  ASSERT_TRUE(testing::DropRawFamily(dir_, "audit").ok());

  fs_->SetNoSpace(true);
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->opened_schema_version(), 1);
  auto state = store->LoadAll();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->gangs.size(), 1u);
  auto audit = store->ReadAudit(0, 10);
  ASSERT_TRUE(audit.ok()) << audit.status();
  EXPECT_TRUE(audit->empty());
  EXPECT_EQ(store->LastAuditSequence().value_or(-1), 0);
  auto frozen = store->Freeze();
  ASSERT_TRUE(frozen.ok()) << frozen.status();
  int parts = 0;
  EXPECT_TRUE((*frozen)
                  ->Export(1 << 20,
                           [&](v1::LogBatch&) {
                             ++parts;
                             return absl::OkStatus();
                           })
                  .ok());
  EXPECT_EQ(parts, 1);
  const absl::Status consistent = store->CheckConsistency();
  EXPECT_TRUE(consistent.ok()) << consistent;

  fs_->SetNoSpace(false);
  core::Mutation audited = SubmitAndCycle(*scheduler, "r2");
  core::AuditRecord record;
  record.sequence = 1;
  record.time = kT0;
  record.principal = "admin";
  record.method = "SubmitGang";
  record.outcome = "OK";
  audited.audit_put.push_back(record);
  ASSERT_TRUE(store->Commit(audited).ok());
  audit = store->ReadAudit(0, 10);
  ASSERT_TRUE(audit.ok()) << audit.status();
  EXPECT_EQ(*audit, audited.audit_put);
  frozen->reset();
  store.reset();

  store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->opened_schema_version(), RocksDbStore::kSchemaVersion);
  EXPECT_EQ(store->LastAuditSequence().value_or(-1), 1);
  state = store->LoadAll();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->gangs.size(), 2u);
  // Every record in its family (none in the default one).
  const absl::Status checked = store->CheckConsistency();
  EXPECT_TRUE(checked.ok()) << checked;
}

TEST_F(DiskFaultTest, AnotherIoErrorIsInternal) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto scheduler = Fleet();
  fs_->FailWrite(1);
  absl::Status failed = store->Commit(scheduler->TakeMutation());
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal) << failed;
  EXPECT_EQ(fs_->stats().io_failures, 1);
}

TEST_F(DiskFaultTest, ACommitReturnsOnlyAfterItsSlowSync) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto scheduler = Fleet();
  fs_->SetSyncDelay(absl::Milliseconds(50));
  const int64_t syncs = fs_->stats().syncs;
  const absl::Time start = absl::Now();
  ASSERT_TRUE(store->Commit(scheduler->TakeMutation()).ok());
  EXPECT_GT(fs_->stats().syncs, syncs);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
}

}  // namespace
}  // namespace phalanx::storage
