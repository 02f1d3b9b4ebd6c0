// The ranking stages of placement, one table each: which domain, how units
// spread over parts, and the fewest-nodes fill.
#include "core/placement_scorers.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using Parts = std::vector<std::pair<int, int64_t>>;

TEST(PlacementScorersTest, BestFitDomain) {
  struct Case {
    std::string name;
    std::vector<int64_t> units;  // of domains 10, 11, 12, ...
    int64_t need;
    bool first_fit;
    int expected;
    int64_t largest;
  };
  const std::vector<Case> cases = {
      {"tightest that holds", {8, 3, 5}, 3, false, 11, 8},
      {"ties to the first", {5, 4, 4}, 4, false, 11, 5},
      {"first fit takes the first that holds", {2, 8, 4}, 4, true, 11, 8},
      {"none holds", {1, 2, 3}, 4, false, -1, 3},
      {"empty", {}, 1, false, -1, 0},
  };
  for (const Case& c : cases) {
    std::vector<int> domains;
    for (size_t i = 0; i < c.units.size(); ++i) {
      domains.push_back(10 + static_cast<int>(i));
    }
    int64_t largest = 0;
    const int best = BestFitDomain(
        domains, c.need, [&](int d) { return c.units[d - 10]; }, c.first_fit,
        largest);
    EXPECT_EQ(best, c.expected) << c.name;
    EXPECT_EQ(largest, c.largest) << c.name;
  }
}

TEST(PlacementScorersTest, Distribute) {
  struct Case {
    std::string name;
    std::vector<int64_t> left;
    std::vector<int64_t> tie;
    int64_t count;
    bool first_fit;
    Parts expected;
  };
  const std::vector<Case> cases = {
      {"the tightest part that holds all",
       {4, 2, 3},
       {0, 0, 0},
       2,
       false,
       {{1, 2}}},
      {"largest first, then the tightest for the rest",
       {4, 1, 2},
       {0, 0, 0},
       6,
       false,
       {{0, 4}, {2, 2}}},
      {"as many units: the fewest free GPUs",
       {2, 2},
       {8, 3},
       2,
       false,
       {{1, 2}}},
      {"equal ties: the first", {2, 2}, {3, 3}, 2, false, {{0, 2}}},
      {"largest first, ties to the fewest free",
       {3, 3, 1},
       {8, 5, 0},
       4,
       false,
       {{1, 3}, {2, 1}}},
      {"first fit: in order", {1, 4, 4}, {0, 0, 0}, 3, true, {{0, 1}, {1, 2}}},
      {"nothing asked", {1}, {0}, 0, false, {}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Distribute(c.left, c.tie, c.count, c.first_fit), c.expected)
        << c.name;
  }
}

TEST(PlacementScorersTest, FewestNodes) {
  struct Case {
    std::string name;
    std::vector<FewestNodesCandidate> nodes;
    int64_t count;
    Parts expected;  // (slot, pods)
  };
  const std::vector<Case> cases = {
      {"the nodes that hold the most first",
       {{1, 4, 1, 0, 100}, {2, 4, 2, 1, 100}, {2, 4, 2, 2, 100}},
       4,
       {{1, 2}, {2, 2}}},
      {"the last node fits the remainder tightly",
       {{4, 4, 8, 0, 100}, {1, 9, 1, 5, 101}, {3, 9, 3, 6, 101}},
       5,
       {{0, 4}, {5, 1}}},
      {"the last node in a lowest domain already used",
       {{2, 2, 2, 0, 100},
        {2, 5, 2, 1, 101},
        {1, 2, 1, 2, 100},
        {1, 5, 1, 3, 101}},
       3,
       {{1, 2}, {3, 1}}},
      {"the last node: in the tightest lowest domain",
       {{2, 2, 2, 0, 100}, {2, 6, 2, 7, 101}},
       2,
       {{0, 2}}},
      {"as many pods and cluster: the fewest free GPUs",
       {{2, 4, 8, 0, 100}, {2, 4, 2, 1, 100}},
       2,
       {{1, 2}}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FewestNodes(c.nodes, c.count), c.expected) << c.name;
  }
}

}  // namespace
}  // namespace phalanx::core
