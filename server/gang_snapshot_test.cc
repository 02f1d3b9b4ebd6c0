#include "server/gang_snapshot.h"

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace phalanx::server {
namespace {

core::GangPtr MakeGang(const std::string& id, const std::string& queue) {
  auto gang = std::make_shared<core::Gang>();
  gang->id = core::GangId(id);
  gang->spec.queue = core::QueueName(queue);
  return gang;
}

TEST(GangSnapshotTest, ApplyLeavesTheOldSnapshotUnchanged) {
  GangSnapshot empty;
  GangSnapshot one = empty.Apply({MakeGang("g-1", "a")}, {});
  GangSnapshot two = one.Apply({MakeGang("g-2", "b")}, {core::GangId("g-1")});
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_NE(one.Find(core::GangId("g-1")), nullptr);
  EXPECT_EQ(two.Find(core::GangId("g-1")), nullptr);
  EXPECT_NE(two.Find(core::GangId("g-2")), nullptr);
  EXPECT_EQ(two.size(), 1u);
}

TEST(GangSnapshotTest, ListPagesInIdOrderWithAFilter) {
  std::vector<core::GangPtr> gangs;
  for (int i = 0; i < 50; ++i) {
    gangs.push_back(MakeGang(absl::StrFormat("g-%03d", i), i % 2 ? "a" : "b"));
  }
  GangSnapshot snapshot = GangSnapshot().Apply(gangs, {});
  auto keep_a = [](const core::Gang& g) { return g.spec.queue.value() == "a"; };
  auto page = snapshot.List("", 10, keep_a);
  ASSERT_EQ(page.size(), 10u);
  EXPECT_EQ(page[0]->id.value(), "g-001");
  EXPECT_EQ(page[9]->id.value(), "g-019");
  auto next = snapshot.List(page.back()->id.value(), 100, keep_a);
  EXPECT_EQ(next.size(), 15u);
  EXPECT_EQ(next[0]->id.value(), "g-021");
}

TEST(GangIdOrderTest, OrdersTrailingNumbersByValue) {
  const GangIdOrder less;
  EXPECT_TRUE(less("g-2", "g-10"));
  EXPECT_FALSE(less("g-10", "g-2"));
  EXPECT_TRUE(less("g-999999", "g-1000000"));
  EXPECT_TRUE(less("g-000042", "g-000043"));
  EXPECT_TRUE(less("g-02", "g-2"));  // equal values: by the text
  EXPECT_FALSE(less("g-2", "g-02"));
  EXPECT_FALSE(less("g-7", "g-7"));
  EXPECT_TRUE(less("", "g-1"));  // the empty page token comes first
  EXPECT_TRUE(less("a-9", "b-1"));
  EXPECT_TRUE(less("g-", "g-0"));
}

TEST(GangSnapshotTest, ListCrossesAMillionInNumericOrder) {
  GangSnapshot snapshot = GangSnapshot().Apply(
      {MakeGang("g-1000000", "a"), MakeGang("g-999999", "a"),
       MakeGang("g-1000001", "a"), MakeGang("g-000010", "a")},
      {});
  auto all = [](const core::Gang&) { return true; };
  auto page = snapshot.List("", 10, all);
  ASSERT_EQ(page.size(), 4u);
  EXPECT_EQ(page[0]->id.value(), "g-000010");
  EXPECT_EQ(page[1]->id.value(), "g-999999");
  EXPECT_EQ(page[2]->id.value(), "g-1000000");
  EXPECT_EQ(page[3]->id.value(), "g-1000001");
  auto after = snapshot.List("g-999999", 10, all);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0]->id.value(), "g-1000000");
}

}  // namespace
}  // namespace phalanx::server
