#include "storage/store_check.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/scheduler.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "phalanx/storage/v1/records.pb.h"
#include "phalanx/v1/types.pb.h"
#include "proto/convert.h"
#include "storage/rocksdb_store.h"
#include "storage/store_testing.h"

namespace phalanx::storage {
namespace {

namespace pb = ::phalanx::v1;
using core::testing::kT0;
using core::testing::MakeNodes;
using core::testing::Spec;
using ::testing::HasSubstr;
using testing::WriteRawRecord;

// A data dir holding 2 nodes of 8 GPUs ("H100-0000", "H100-0001"), queue
// "llm" and two admitted one-pod gangs of 8 GPUs, g-000001 and g-000002,
// one on each node, submitted with request ids "r1" and "r2".
class StoreCheckTest : public ::testing::Test {
 protected:
  StoreCheckTest() {
    char pattern[] = "/tmp/phalanx-check-XXXXXX";
    dir_ = mkdtemp(pattern);
    core::Scheduler s(core::Config{});
    EXPECT_TRUE(s.UpsertNodes(MakeNodes(1, 1, 2)).ok());
    core::Queue queue;
    queue.name = core::QueueName("llm");
    EXPECT_TRUE(s.PutQueue(queue).ok());
    EXPECT_TRUE(s.Submit(Spec("llm").Pods(1, 8).RequestId("r1"), kT0).ok());
    EXPECT_TRUE(s.Submit(Spec("llm").Pods(1, 8).RequestId("r2"), kT0).ok());
    s.RunCycle(kT0 + absl::Seconds(1));
    auto store = RocksDbStore::Open(dir_);
    EXPECT_TRUE(store.ok()) << store.status();
    EXPECT_TRUE((*store)->Commit(s.TakeMutation()).ok());
  }
  ~StoreCheckTest() override { std::filesystem::remove_all(dir_); }

  // The stored gang `id`, as the store loads it.
  core::Gang LoadGang(const std::string& id) {
    auto store = RocksDbStore::Open(dir_);
    EXPECT_TRUE(store.ok()) << store.status();
    auto state = (*store)->LoadAll();
    EXPECT_TRUE(state.ok()) << state.status();
    for (const core::Gang& gang : state->gangs) {
      if (gang.id.value() == id) return gang;
    }
    ADD_FAILURE() << "no gang " << id;
    return core::Gang{};
  }

  // Writes `gang`'s record under `key` (its id by default), bypassing the
  // store.
  void PutGang(const core::Gang& gang, std::string key = "") {
    pb::Gang proto;
    convert::ToProto(gang, &proto);
    PutRaw("gangs", key.empty() ? gang.id.value() : key,
           proto.SerializeAsString());
  }

  void PutRaw(const std::string& family, const std::string& key,
              std::optional<std::string> value) {
    ASSERT_TRUE(WriteRawRecord(dir_, family, key, value).ok());
  }

  // The check's verdict, which must be DataLoss when not OK.
  std::string Check() {
    absl::Status status = CheckStoreConsistency(dir_);
    if (!status.ok()) {
      EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    }
    return std::string(status.message());
  }

  std::string dir_;
};

TEST_F(StoreCheckTest, AStoreTheSchedulerWrotePasses) {
  EXPECT_TRUE(CheckStoreConsistency(dir_).ok()) << CheckStoreConsistency(dir_);
  // Also a store open for writing, and a backup of it.
  auto store = RocksDbStore::Open(dir_);
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE((*store)->CheckConsistency().ok())
      << (*store)->CheckConsistency();
  const std::string backup = dir_ + "/backup";
  ASSERT_TRUE((*store)->CreateCheckpoint(backup).ok());
  EXPECT_TRUE(CheckStoreConsistency(backup).ok())
      << CheckStoreConsistency(backup);
}

TEST_F(StoreCheckTest, ReadOnlyOpenRefusesCommits) {
  RocksDbStore::Options options;
  options.read_only = true;
  auto store = RocksDbStore::Open(dir_, options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Commit(core::Mutation{}).code(),
            absl::StatusCode::kFailedPrecondition);
}

// A running phalanxd holds the data dir (here a store open for writing in
// this process; tests/crash_test.cc runs the check against another
// process): the check refuses it, and passes once it is closed.
TEST_F(StoreCheckTest, RefusesADataDirOpenForWriting) {
  auto store = RocksDbStore::Open(dir_);
  ASSERT_TRUE(store.ok()) << store.status();
  const absl::Status refused = CheckStoreConsistency(dir_);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(),
              HasSubstr("in use by a running phalanxd (it holds " + dir_ +
                        "/LOCK): stop it first"));
  // The writer keeps its lock: a second writer is still refused.
  EXPECT_FALSE(RocksDbStore::Open(dir_).ok());
  store->reset();
  EXPECT_TRUE(CheckStoreConsistency(dir_).ok()) << CheckStoreConsistency(dir_);
}

// A data dir of the schema before the audit family (version 1, no `audit`
// column family) passes, read as it is (not migrated).
TEST_F(StoreCheckTest, AStoreOfTheSchemaBeforeTheAuditFamilyPasses) {
  ASSERT_TRUE(testing::SetRawSchemaVersion(dir_, "").ok());
  ASSERT_TRUE(testing::DropRawFamily(dir_, "audit").ok());
  EXPECT_TRUE(CheckStoreConsistency(dir_).ok()) << CheckStoreConsistency(dir_);
  RocksDbStore::Options options;
  options.read_only = true;
  auto store = RocksDbStore::Open(dir_, options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->opened_schema_version(), 1);
  auto audit = (*store)->ReadAudit(0, 10);
  ASSERT_TRUE(audit.ok()) << audit.status();
  EXPECT_TRUE(audit->empty());
}

TEST_F(StoreCheckTest, NamesAMissingDataDir) {
  EXPECT_EQ(CheckStoreConsistency(dir_ + "/nothing").code(),
            absl::StatusCode::kNotFound);
}

TEST_F(StoreCheckTest, NamesAPlacementOnANodeTheStoreLacks) {
  const core::Gang gang = LoadGang("g-000001");
  PutRaw("nodes", gang.placement[0].node.value(), std::nullopt);
  EXPECT_EQ(Check(), absl::StrCat("gangs/\"g-000001\": placement[0].node: "
                                  "node \"",
                                  gang.placement[0].node.value(),
                                  "\" is not in the store"));
}

TEST_F(StoreCheckTest, NamesAGpuHeldByTwoGangs) {
  const core::Gang first = LoadGang("g-000001");
  core::Gang second = LoadGang("g-000002");
  second.placement = first.placement;
  PutGang(second);
  EXPECT_EQ(Check(),
            absl::StrCat("gangs/\"g-000002\": placement[0].gpu_indices: GPU 0 "
                         "of node ",
                         first.placement[0].node.value(),
                         " is also held by gang g-000001"));
}

TEST_F(StoreCheckTest, NamesAGpuIndexPastTheNodesCount) {
  core::Gang gang = LoadGang("g-000001");
  gang.placement[0].gpu_indices.back() = 8;
  PutGang(gang);
  EXPECT_THAT(Check(), HasSubstr("gangs/\"g-000001\": placement[0]."
                                 "gpu_indices: GPU 8 of node "));
  EXPECT_THAT(Check(), HasSubstr("is outside [0, 8)"));
}

TEST_F(StoreCheckTest, NamesARequestKeyNamingAGangNeverIssued) {
  storage::v1::RequestRecord record;
  core::RequestRecord dangling;
  dangling.gang_id = core::GangId("g-000099");
  dangling.expires = kT0 + absl::Hours(1);
  convert::ToProto(dangling, &record);
  PutRaw("requests", std::string("llm\0r9", 6), record.SerializeAsString());
  EXPECT_EQ(Check(),
            "requests/\"llm\\x00r9\": gang_id: g-000099 was not issued yet "
            "(meta.next_gang_seq is 3)");
}

TEST_F(StoreCheckTest, NamesAGangStoredUnderAnotherKey) {
  PutGang(LoadGang("g-000001"), "g-000000");
  EXPECT_EQ(Check(),
            "gangs/\"g-000000\": the record's id is \"g-000001\", not its key");
}

TEST_F(StoreCheckTest, NamesAGangStateThatIsNoState) {
  pb::Gang proto;
  convert::ToProto(LoadGang("g-000002"), &proto);
  proto.set_state(static_cast<pb::GangState>(42));
  PutRaw("gangs", "g-000002", proto.SerializeAsString());
  EXPECT_THAT(Check(), HasSubstr("gangs/\"g-000002\": state"));
}

TEST_F(StoreCheckTest, NamesAnEventPastTheLastRevision) {
  pb::GangEvent event;
  event.set_revision(1000);
  event.set_type(pb::EVENT_TYPE_BOOKMARK);
  PutRaw("events", EventKey(1000), event.SerializeAsString());
  EXPECT_THAT(Check(), HasSubstr("revision 1000 is outside the retained "
                                 "range [1, "));
}

TEST_F(StoreCheckTest, NamesAnEventUnderAnotherRevisionsKey) {
  pb::GangEvent event;
  event.set_revision(2);
  event.set_type(pb::EVENT_TYPE_BOOKMARK);
  PutRaw("events", EventKey(1), event.SerializeAsString());
  EXPECT_EQ(Check(),
            "events/\"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01\": the "
            "record's revision is \"2\", not its key");
}

TEST_F(StoreCheckTest, NamesALedgerEntryOfNoQueue) {
  storage::v1::LedgerRecord record;
  PutRaw("ledger", "gone", record.SerializeAsString());
  EXPECT_EQ(Check(), "ledger/\"gone\": no queue of this name is in the store");
}

TEST_F(StoreCheckTest, NamesABadLogSeqAndUnknownMetaKeys) {
  PutRaw("meta", "log_seq", "123");
  EXPECT_THAT(Check(), HasSubstr("meta/\"log_seq\": log seq: bad length"));
  PutRaw("meta", "log_seq", std::nullopt);
  PutRaw("meta", "stray", "x");
  EXPECT_EQ(Check(), "meta/\"stray\": not a key of the meta family");
}

TEST_F(StoreCheckTest, NamesWhatAStartUpWouldRefuse) {
  // Two pods' worth of placement for a one-pod gang: the shape check of a
  // restore, reached through Scheduler::Restore.
  core::Gang gang = LoadGang("g-000001");
  core::PodPlacement extra = gang.placement[0];
  extra.index = 1;
  extra.gpu_indices.clear();
  gang.placement.push_back(extra);
  PutGang(gang);
  EXPECT_THAT(Check(), HasSubstr("the state does not restore: "));
}

}  // namespace
}  // namespace phalanx::storage
