// RocksDbStore on a full, failing or slow disk (storage/fault_fs.h): a write
// refused for lack of space writes nothing and the store resumes once space
// is free; another I/O error is Internal; a commit waits for its sync.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "core/scheduler.h"
#include "core/testing.h"
#include "gtest/gtest.h"
#include "storage/fault_fs.h"
#include "storage/rocksdb_store.h"

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
