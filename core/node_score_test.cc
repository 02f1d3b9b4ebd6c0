#include "core/node_score.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

absl::Time T(int64_t seconds) { return absl::FromUnixSeconds(seconds); }

TEST(UnusableGpusTest, Table) {
  struct Case {
    int free;
    double want;
  } cases[] = {
      {0, 0},     // nothing free
      {8, 0},     // a whole node: every size fits
      {1, 0.75},  // 2, 4 and 8 do not fit
      {2, 1.0},   // 4 and 8 do not fit
      {3, 1.5},   // 4 and 8 do not fit
      {4, 1.0},   // 8 does not fit
      {7, 1.75},  // 8 does not fit
  };
  for (const Case& c : cases) {
    EXPECT_DOUBLE_EQ(UnusableGpus(c.free, 8), c.want) << "free " << c.free;
  }
}

// Ranks nodes of 8 GPUs with `free` free GPUs for `pod` GPUs, FGD only.
std::vector<int> FgdOrder(std::vector<int> frees, int pod) {
  std::stable_sort(frees.begin(), frees.end(), [pod](int a, int b) {
    return RankNode({8, a}, {pod}, true, false) <
           RankNode({8, b}, {pod}, true, false);
  });
  return frees;
}

TEST(FragmentationDeltaTest, SmallPodsGoToBrokenNodesAndLeaveUsableRemainders) {
  // One GPU: an exact fit first; then 3 free (leaves a pair) before 2
  // (leaves a single); 5 (leaves 4) before 4 (leaves 3); a whole node last.
  EXPECT_EQ(FgdOrder({8, 4, 2, 5, 3, 1}, 1),
            (std::vector<int>{1, 3, 2, 5, 4, 8}));
  // Four GPUs: exact fit; 5 and 6 tie (each removes half a GPU of
  // fragment), best fit breaks it; a whole node last.
  EXPECT_EQ(FgdOrder({8, 6, 5, 4}, 4), (std::vector<int>{4, 5, 6, 8}));
  // A whole-node pod takes a whole node at no cost.
  EXPECT_DOUBLE_EQ(FragmentationDelta({8, 8}, {8}), 0);
}

TEST(EndGapTest, NodesWhoseGangsEndWithThePodComeFirst) {
  const ScoredPod pod{1, T(1000)};
  const ScoredNode close{8, 4, T(1100)};
  const ScoredNode far{8, 4, T(9000)};
  const ScoredNode idle{8, 4, absl::InfinitePast()};
  const ScoredNode unknown{8, 4, absl::InfiniteFuture()};
  EXPECT_DOUBLE_EQ(EndGapSeconds(close, pod), 100);
  EXPECT_DOUBLE_EQ(EndGapSeconds(far, pod), 8000);
  EXPECT_LT(RankNode(close, pod, false, true), RankNode(far, pod, false, true));
  EXPECT_LT(RankNode(far, pod, false, true), RankNode(idle, pod, false, true));
  EXPECT_EQ(EndGapSeconds(idle, pod), EndGapSeconds(unknown, pod));
  // Without an estimate the pod has no end to match: every node alike.
  EXPECT_EQ(EndGapSeconds(close, {1}), EndGapSeconds(far, {1}));
}

TEST(RankNodeTest, EndTimeOnlyReordersNodesBestFitTies) {
  const ScoredPod pod{1, T(1000)};
  // Fewer free GPUs still wins over a closer end without FGD...
  EXPECT_LT(RankNode({8, 2, T(9000)}, pod, false, true),
            RankNode({8, 3, T(1000)}, pod, false, true));
  // ...and with both stages, FGD's order comes first.
  EXPECT_LT(RankNode({8, 3, T(9000)}, pod, true, true),
            RankNode({8, 2, T(1000)}, pod, true, true));
  // Both off: best fit.
  EXPECT_LT(RankNode({8, 2}, pod, false, false),
            RankNode({8, 3}, pod, false, false));
}

}  // namespace
}  // namespace phalanx::core
