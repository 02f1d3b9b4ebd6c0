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

}  // namespace
}  // namespace phalanx::server
