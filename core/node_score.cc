#include "core/node_score.h"

#include <array>
#include <cmath>
#include <limits>

namespace phalanx::core {
namespace {

// Larger than any real gap between two expected ends (about 31 years).
constexpr double kNoGapSeconds = 1e9;

}  // namespace

double UnusableGpus(int free, int gpu_count) {
  if (free <= 0 || free >= gpu_count) return 0;
  const std::array<int, 4> sizes = {1, 2, 4, gpu_count};
  double unusable = 0;
  for (int size : sizes) {
    if (size > free) unusable += free;
  }
  return unusable / static_cast<double>(sizes.size());
}

double FragmentationDelta(const ScoredNode& node, const ScoredPod& pod) {
  return UnusableGpus(node.free_gpus - pod.gpus, node.gpu_count) -
         UnusableGpus(node.free_gpus, node.gpu_count);
}

double EndGapSeconds(const ScoredNode& node, const ScoredPod& pod) {
  const absl::Time inf = absl::InfiniteFuture();
  if (node.latest_end == absl::InfinitePast() || node.latest_end == inf ||
      pod.expected_end == inf) {
    return kNoGapSeconds;
  }
  return std::fabs(absl::ToDoubleSeconds(node.latest_end - pod.expected_end));
}

NodeRank RankNode(const ScoredNode& node, const ScoredPod& pod,
                  bool fragmentation, bool end_time) {
  NodeRank rank;
  // Best fit's own order when FGD is off: the fewest free GPUs first, so
  // the end-time stage only reorders nodes of equal free GPUs.
  rank.fragmentation = fragmentation ? FragmentationDelta(node, pod)
                                     : static_cast<double>(node.free_gpus);
  rank.end_gap = end_time ? EndGapSeconds(node, pod) : 0;
  rank.free_gpus = node.free_gpus;
  return rank;
}

}  // namespace phalanx::core
