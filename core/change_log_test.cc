#include "core/change_log.h"

#include "core/fair_share.h"
#include "core/fleet.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

GangPtr MakeGang(const std::string& id) {
  Gang gang;
  gang.id = GangId(id);
  return std::make_shared<const Gang>(gang);
}

struct Owners {
  Fleet fleet{{"block", "rack"}};
  absl::btree_map<QueueName, Queue> queues;
  Config config;
  FairShareLedger ledger;
};

TEST(ChangeLogTest, CountersStartFromTheStoredMeta) {
  ChangeLog log;
  log.Restore(Meta{41, 7, 3});
  EXPECT_EQ(log.NewGangId(), GangId("g-000007"));
  EXPECT_EQ(log.NewGangId(), GangId("g-000008"));
  EXPECT_EQ(log.NextRevision(), 42);
  EXPECT_EQ(log.meta(), (Meta{42, 9, 3}));
}

TEST(ChangeLogTest, TakeReturnsTheLatestRecordOfEachGangInIdOrderAndClears) {
  ChangeLog log;
  Owners o;
  log.PutGang(MakeGang("g-2"));
  log.PutGang(MakeGang("g-1"));
  log.PutGang(MakeGang("g-3"));
  log.DeleteGang(GangId("g-3"));  // a delete overrides an earlier put
  Mutation m = log.Take(o.fleet, o.queues, o.config, o.ledger);
  ASSERT_EQ(m.gangs_put.size(), 2u);
  EXPECT_EQ(m.gangs_put[0]->id, GangId("g-1"));
  EXPECT_EQ(m.gangs_put[1]->id, GangId("g-2"));
  EXPECT_THAT(m.gangs_deleted, ElementsAre(GangId("g-3")));
  EXPECT_TRUE(log.Take(o.fleet, o.queues, o.config, o.ledger).empty());
}

TEST(ChangeLogTest, NodesAndQueuesAreReadFromTheirOwnersAtTake) {
  ChangeLog log;
  Owners o;
  o.fleet.Upsert(testing::MakeNodes(1, 1, 2));
  const NodeId first = o.fleet.slots()[0].node.spec.id;
  const NodeId second = o.fleet.slots()[1].node.spec.id;
  o.queues[QueueName("q")].name = QueueName("q");
  log.PutNode(first);
  log.PutNode(second);
  log.DeleteNode(second);
  log.PutQueue(QueueName("q"));
  log.DeleteQueue(QueueName("old"));
  log.PutConfig();
  Mutation m = log.Take(o.fleet, o.queues, o.config, o.ledger);
  ASSERT_EQ(m.nodes_put.size(), 1u);
  EXPECT_EQ(m.nodes_put[0].spec.id, first);
  EXPECT_THAT(m.nodes_deleted, ElementsAre(second));
  ASSERT_EQ(m.queues_put.size(), 1u);
  EXPECT_EQ(m.queues_put[0].name, QueueName("q"));
  EXPECT_THAT(m.queues_deleted, ElementsAre(QueueName("old")));
  EXPECT_TRUE(m.config.has_value());
}

TEST(ChangeLogTest, TrimEventsKeepsTheNewestAndRecordsTheCut) {
  ChangeLog log;
  Owners o;
  for (int i = 0; i < 10; ++i) log.NextRevision();
  log.TrimEvents(20);  // within retention: nothing to trim
  EXPECT_EQ(log.Take(o.fleet, o.queues, o.config, o.ledger).trim_events_before,
            0);
  log.TrimEvents(4);
  Mutation m = log.Take(o.fleet, o.queues, o.config, o.ledger);
  EXPECT_EQ(m.trim_events_before, 7);
  EXPECT_EQ(m.meta.first_retained_revision, 7);
}

TEST(ChangeLogTest, ClearForgetsChangesButKeepsCounters) {
  ChangeLog log;
  Owners o;
  log.NextRevision();
  log.PutGang(MakeGang("g-1"));
  log.Record(Event{1, EventType::kSubmitted, absl::UnixEpoch(), nullptr});
  log.Clear();
  Mutation m = log.Take(o.fleet, o.queues, o.config, o.ledger);
  EXPECT_THAT(m.gangs_put, IsEmpty());
  EXPECT_THAT(m.events, IsEmpty());
  EXPECT_EQ(m.meta.last_revision, 1);
}

}  // namespace
}  // namespace phalanx::core
