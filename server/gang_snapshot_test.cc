#include "server/gang_snapshot.h"

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

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

TEST(GangSnapshotTest, TheLaterOfTwoPutsOfOneIdWins) {
  GangSnapshot first = GangSnapshot().Apply(
      {MakeGang("g-1", "a"), MakeGang("g-2", "a"), MakeGang("g-1", "b")}, {});
  EXPECT_EQ(first.size(), 2u);
  EXPECT_EQ(first.Find(core::GangId("g-1"))->spec.queue.value(), "b");
  GangSnapshot later =
      first.Apply({MakeGang("g-2", "c"), MakeGang("g-2", "d")}, {});
  EXPECT_EQ(later.size(), 2u);
  EXPECT_EQ(later.Find(core::GangId("g-2"))->spec.queue.value(), "d");
  EXPECT_EQ(first.Find(core::GangId("g-2"))->spec.queue.value(), "a");
}

// A first view built from ids in order, or in any other order, is the same
// snapshot: ids of every shape (long texts, no digits, leading zeros, more
// than 19 digits, a text of NUL bytes) in GangIdOrder, the later of two puts
// of one id winning.
TEST(GangSnapshotTest, BuildsTheSameSnapshotFromOrderedAndShuffledPuts) {
  std::vector<std::string> ids = {"g-02",
                                  "g-2",
                                  "g-",
                                  "g-0",
                                  "g-000",
                                  "",
                                  "abc",
                                  "g-999999",
                                  "g-1000000",
                                  "g-100001",
                                  "a-9",
                                  "b-1",
                                  "prefix-long-12",
                                  "prefix-long-3",
                                  "prefix-lonh-1",
                                  "x-123456789012345678901",
                                  "x-99999999999999999999",
                                  "x-9",
                                  std::string("g\0", 2),
                                  std::string("g\0-1", 4),
                                  "g-7"};
  for (int i = 0; i < 300; ++i) ids.push_back(absl::StrFormat("g-%06d", i));
  std::vector<std::string> ordered = ids;
  std::sort(ordered.begin(), ordered.end(), GangIdOrder());
  std::mt19937 random(11);
  std::vector<std::string> shuffled = ids;
  std::shuffle(shuffled.begin(), shuffled.end(), random);
  auto all = [](const core::Gang&) { return true; };
  for (const std::vector<std::string>* input : {&ordered, &shuffled}) {
    std::vector<core::GangPtr> put;
    for (const std::string& id : *input) put.push_back(MakeGang(id, "first"));
    put.push_back(MakeGang("g-2", "second"));  // a later put of one id wins
    put.push_back(MakeGang("", "second"));
    GangSnapshot snapshot = GangSnapshot().Apply(put, {});
    ASSERT_EQ(snapshot.size(), ids.size());
    // The empty id sorts first, so List("") starts after it.
    std::vector<core::GangPtr> listed = snapshot.List("", 1000, all);
    ASSERT_EQ(listed.size(), ordered.size() - 1);
    for (size_t i = 0; i < listed.size(); ++i) {
      EXPECT_EQ(listed[i]->id.value(), ordered[i + 1]) << i;
    }
    EXPECT_EQ(snapshot.Find(core::GangId("g-2"))->spec.queue.value(), "second");
    EXPECT_EQ(snapshot.Find(core::GangId(""))->spec.queue.value(), "second");
    EXPECT_EQ(snapshot.Find(core::GangId("g-02"))->spec.queue.value(), "first");
  }
}

// Random puts, replacements and deletes against a std::map in the same
// order; every snapshot on the way must stay as it was.
TEST(GangSnapshotTest, MatchesAnOrderedMapAndKeepsOldSnapshots) {
  std::mt19937 random(7);
  std::map<std::string, std::string, GangIdOrder> model;
  GangSnapshot snapshot;
  std::vector<
      std::pair<GangSnapshot, std::map<std::string, std::string, GangIdOrder>>>
      kept;
  for (int batch = 0; batch < 200; ++batch) {
    std::vector<core::GangPtr> put;
    std::vector<core::GangId> deleted;
    for (int op = 0; op < 8; ++op) {
      const std::string id = absl::StrFormat("g-%d", random() % 300);
      if (random() % 4 == 0) {
        deleted.push_back(core::GangId(id));
      } else {
        const std::string queue = absl::StrFormat("q%d", random() % 5);
        put.push_back(MakeGang(id, queue));
      }
    }
    // Apply stores every put, then removes every deleted id.
    for (const auto& gang : put)
      model[gang->id.value()] = gang->spec.queue.value();
    for (const auto& id : deleted) model.erase(id.value());
    snapshot = snapshot.Apply(put, deleted);
    if (batch % 20 == 0) kept.emplace_back(snapshot, model);
  }
  kept.emplace_back(snapshot, model);
  auto all = [](const core::Gang&) { return true; };
  for (const auto& [old, expected] : kept) {
    ASSERT_EQ(old.size(), expected.size());
    std::vector<core::GangPtr> listed = old.List("", 1000, all);
    ASSERT_EQ(listed.size(), expected.size());
    auto it = expected.begin();
    for (const core::GangPtr& gang : listed) {
      EXPECT_EQ(gang->id.value(), it->first);
      EXPECT_EQ(gang->spec.queue.value(), it->second);
      EXPECT_EQ(old.Find(gang->id), gang);
      ++it;
    }
    EXPECT_EQ(old.Find(core::GangId("g-300")), nullptr);
    // Pages of 7 from the middle match the map's upper_bound.
    const std::string after = "g-150";
    std::vector<core::GangPtr> page = old.List(after, 7, all);
    auto from = expected.upper_bound(after);
    for (const core::GangPtr& gang : page) {
      ASSERT_NE(from, expected.end());
      EXPECT_EQ(gang->id.value(), from->first);
      ++from;
    }
  }
}

}  // namespace
}  // namespace phalanx::server
