#include "storage/rocksdb_store.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/scheduler.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace phalanx::storage
