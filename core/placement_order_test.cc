// The order stage: most constrained first, independent of listing, and the
// bound on the orders the joint search tries.
#include "core/placement_order.h"

#include <set>
#include <string>
#include <vector>

#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::ElementsAre;
using testing::Spec;

std::vector<std::string> Names(const GangSpec& spec,
                               const std::vector<size_t>& order) {
  std::vector<std::string> names;
  for (size_t i : order) names.push_back(spec.pod_sets[i].name);
  return names;
}

TEST(PlacementOrderTest, MostConstrainedFirst) {
  const Fleet fleet({"block", "rack"});
  struct Case {
    std::string name;
    GangSpec spec;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"larger pods first",
       Spec("q").Pods(1, 1, "leader").Pods(4, 8, "workers"),
       {"workers", "leader"}},
      {"larger slices first",
       Spec("q").Pods(1, 1, "leader").Pods(14, 1, "workers").Slices(2, "node"),
       {"workers", "leader"}},
      {"required before preferred before unconstrained",
       Spec("q")
           .Pods(1, 2, "free")
           .Pods(1, 2, "preferred")
           .Preferred("rack")
           .Pods(1, 2, "required")
           .Required("rack"),
       {"required", "preferred", "free"}},
      {"narrower level first",
       Spec("q")
           .Pods(1, 2, "block")
           .Required("block")
           .Pods(1, 2, "rack")
           .Required("rack"),
       {"rack", "block"}},
      {"more GPUs in all first",
       Spec("q").Pods(1, 2, "few").Pods(3, 2, "many"),
       {"many", "few"}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Names(c.spec, MostConstrainedFirst(c.spec, fleet)), c.expected)
        << c.name;
    // Listed the other way round, the same sets come in the same order.
    GangSpec reversed = c.spec;
    std::reverse(reversed.pod_sets.begin(), reversed.pod_sets.end());
    EXPECT_EQ(Names(reversed, MostConstrainedFirst(reversed, fleet)),
              c.expected)
        << c.name;
  }
}

TEST(PlacementOrderTest, SearchTriesEveryOrderOfSmallGangsWithinTheBound) {
  struct Case {
    size_t sets;
    size_t orders;  // besides the first
  };
  for (const Case& c : std::vector<Case>{
           {1, 0}, {2, 1}, {3, 5}, {4, 23}, {5, 4}, {8, 7}, {40, 23}}) {
    std::vector<size_t> first;
    for (size_t i = 0; i < c.sets; ++i) first.push_back(c.sets - 1 - i);
    OrderSearch search(first);
    std::set<std::vector<size_t>> seen = {first};
    size_t orders = 0;
    for (std::vector<size_t> order; search.Next(order);) {
      EXPECT_TRUE(seen.insert(order).second) << c.sets << " sets: repeated";
      EXPECT_EQ(order.size(), c.sets);
      ++orders;
    }
    EXPECT_EQ(orders, c.orders) << c.sets << " sets";
    EXPECT_LE(orders + 1, kMaxOrders);
  }
}

TEST(PlacementOrderTest, LargeGangsBringEachSetToTheFront) {
  OrderSearch search({4, 3, 2, 1, 0});
  std::vector<size_t> order;
  ASSERT_TRUE(search.Next(order));
  EXPECT_THAT(order, ElementsAre(3, 4, 2, 1, 0));
  ASSERT_TRUE(search.Next(order));
  EXPECT_THAT(order, ElementsAre(2, 4, 3, 1, 0));
}

}  // namespace
}  // namespace phalanx::core
