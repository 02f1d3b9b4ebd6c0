#include "core/gang_table.h"

#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

using testing::kT0;

Gang Pending(const std::string& id, const std::string& queue = "q",
             int priority = 0) {
  Gang gang;
  gang.id = GangId(id);
  gang.spec = testing::Spec(queue).Pods(1, 8).Priority(priority);
  gang.submit_time = kT0;
  return gang;
}

Gang Admitted(Gang gang, absl::Time at, absl::Duration estimate) {
  gang.state = GangState::kAdmitted;
  gang.admit_time = at;
  gang.spec.estimated_runtime = estimate;
  gang.placement = {PodPlacement{"set-0", 0, NodeId("n"), {0}}};
  return gang;
}

TEST(GangTableTest, HandlesStayWithTheirGangAndAreReusedAfterErase) {
  GangTable table;
  const GangHandle a = table.Put(Pending("g-1")).handle;
  const GangHandle b = table.Put(Pending("g-2")).handle;
  EXPECT_NE(a, b);
  // A new record of the same gang keeps its handle.
  EXPECT_EQ(table.Put(Admitted(Pending("g-1"), kT0, absl::Hours(1))).handle, a);
  EXPECT_EQ(table.HandleOf(GangId("g-1")), a);
  EXPECT_EQ(table.At(a)->state, GangState::kAdmitted);
  EXPECT_EQ(table.Peek(b)->id, GangId("g-2"));
  // The pending index files a gang with its handle.
  EXPECT_EQ(table.pending().groups().begin()->second.members.begin()->handle,
            b);

  Gang done = *table.At(a);
  done.state = GangState::kSucceeded;
  done.finish_time = kT0;
  table.Put(std::move(done));
  table.Erase(GangId("g-1"));
  EXPECT_EQ(table.HandleOf(GangId("g-1")), kNoGang);
  EXPECT_EQ(table.Peek(a), nullptr);
  EXPECT_EQ(table.Peek(kNoGang), nullptr);
  EXPECT_EQ(table.Put(Pending("g-3")).handle, a) << "the freed handle";
  EXPECT_EQ(table.At(a)->id, GangId("g-3"));
}

TEST(GangTableTest, AllListsEveryStoredGangOnceInHandleOrder) {
  GangTable table;
  for (const char* id : {"g-1", "g-2", "g-3"}) table.Put(Pending(id));
  Gang first = *table.Find(GangId("g-1"));
  first.state = GangState::kCancelled;
  first.finish_time = kT0;
  table.Put(std::move(first));
  table.Erase(GangId("g-1"));
  std::vector<std::string> ids;
  for (const auto& [id, gang] : table.all()) {
    EXPECT_EQ(gang->id, id);
    ids.push_back(id.value());
  }
  EXPECT_THAT(ids, ElementsAre("g-2", "g-3"));
  EXPECT_EQ(table.all().size(), 2u);
}

TEST(GangTableTest, APendingGangIsInThePendingIndexAndCounted) {
  GangTable table;
  GangTable::PutResult put = table.Put(Pending("g-1"));
  EXPECT_FALSE(put.left_pending);
  EXPECT_EQ(table.Find(GangId("g-1")), put.gang);
  EXPECT_EQ(table.pending().size(), 1u);
  EXPECT_EQ(table.PendingAndActive(QueueName("q")), std::make_pair(1, 0));
  EXPECT_EQ(table.ActiveIn(QueueName("q")), nullptr);
}

TEST(GangTableTest, AdmissionMovesAGangToTheActiveIndexes) {
  GangTable table;
  table.Put(Pending("g-1", "q", 2));
  table.Put(Pending("g-2", "q", 1));
  GangTable::PutResult put =
      table.Put(Admitted(Pending("g-1", "q", 2), kT0, absl::Hours(2)));
  EXPECT_TRUE(put.left_pending);
  table.Put(Admitted(Pending("g-2", "q", 1), kT0, absl::Hours(1)));
  EXPECT_EQ(table.pending().size(), 0u);
  EXPECT_EQ(table.EarliestEnd(), kT0 + absl::Hours(1));
  const GangTable::ActiveByPriority* active = table.ActiveIn(QueueName("q"));
  ASSERT_NE(active, nullptr);
  EXPECT_EQ(active->size(), 2u);  // priorities 1 and 2
  EXPECT_EQ(table.ActiveIn(QueueName("other")), nullptr);
  EXPECT_EQ(table.PendingAndActive(QueueName("q")), std::make_pair(0, 2));
}

TEST(GangTableTest, PutNormalizesWhatThePlacementMeans) {
  GangTable table;
  Gang requeued = Admitted(Pending("g-1"), kT0, absl::Hours(1));
  requeued.state = GangState::kPending;
  requeued.grace_deadline = kT0;
  requeued.lease_expire_time = kT0;
  GangPtr pending = table.Put(requeued).gang;
  EXPECT_THAT(pending->placement, IsEmpty());
  EXPECT_FALSE(pending->grace_deadline.has_value());
  EXPECT_FALSE(pending->lease_expire_time.has_value());

  Gang done = Admitted(Pending("g-2"), kT0, absl::Hours(1));
  done.state = GangState::kSucceeded;
  GangPtr final_gang = table.Put(done).gang;
  EXPECT_EQ(final_gang->placement.size(), 1u);
  EXPECT_TRUE(final_gang->placement_released);
}

TEST(GangTableTest, LeasesFollowTheGangsHoldingGpus) {
  GangTable table;
  Gang leased = Admitted(Pending("g-1"), kT0, absl::Hours(1));
  leased.lease_expire_time = kT0 + absl::Minutes(1);
  table.Put(leased);
  EXPECT_EQ(table.leases().size(), 1u);
  leased.state = GangState::kFailed;
  table.Put(leased);
  EXPECT_EQ(table.leases().size(), 0u);
}

TEST(GangTableTest, RetireDeletesTheOldestFinalGangsAndTombstonesNamedOnes) {
  GangTable table;
  int finished = 0;
  for (const char* id : {"g-1", "g-2", "g-3"}) {
    Gang gang = Pending(id);
    gang.state = GangState::kCancelled;
    gang.finish_time = kT0 + absl::Seconds(++finished);
    table.Put(gang);
  }
  RetentionConfig keep;
  keep.finished_gangs = 1;
  keep.finished_gang_age = absl::Hours(24);
  auto named = [](const Gang& gang) { return gang.id == GangId("g-1"); };
  EXPECT_THAT(table.Retire(keep, kT0, named), ElementsAre(GangId("g-2")));
  // g-1 stays (a tombstone, out of retention's count); g-3 is within it.
  EXPECT_NE(table.Find(GangId("g-1")), nullptr);
  EXPECT_TRUE(table.DropTombstone(GangId("g-1")));
  EXPECT_FALSE(table.DropTombstone(GangId("g-1")));
}

TEST(GangTableTest, ReplacePendingRefusesARecordThatIsNotTheStoredOne) {
  GangTable table;
  GangPtr stored = table.Put(Pending("g-1")).gang;
  Gang stale = *stored;
  GangPtr other = std::make_shared<const Gang>(stale);
  Gang update = stale;
  update.reason = "NO_FIT: x";
  EXPECT_EQ(table.ReplacePending(other, std::move(update)), nullptr);
  EXPECT_EQ(update.reason, "NO_FIT: x");  // untouched on refusal
  GangPtr replaced = table.ReplacePending(stored, std::move(update));
  ASSERT_NE(replaced, nullptr);
  EXPECT_EQ(table.Find(GangId("g-1"))->reason, "NO_FIT: x");
}

TEST(GangTableTest, EraseForgetsTheGangAndItsCount) {
  GangTable table;
  Gang gang = Pending("g-1");
  gang.state = GangState::kCancelled;
  table.Put(gang);
  table.Erase(GangId("g-1"));
  EXPECT_EQ(table.Find(GangId("g-1")), nullptr);
  EXPECT_EQ(table.counts().at({QueueName("q"), GangState::kCancelled}), 0);
}

}  // namespace
}  // namespace phalanx::core
