// Node scorers for pods without a topology constraint (the small pods that
// break nodes up). Best fit alone packs the least-free node first; these
// stages refine that order:
//  - FragmentationDelta (FGD-style, after Alibaba's "fragmentation
//    gradient descent"): how much a placement adds to the GPUs that pods of
//    common sizes (1, 2, 4 and a whole node) could no longer use. It keeps
//    small pods on nodes that are already broken and leaves remainders that
//    fit the next pod (a 1-GPU pod goes to a node with 3 free before one
//    with 2, so a pair still fits), and breaks a whole node last.
//  - EndGapSeconds (end-time-aware packing): among nodes the first stage
//    ties, the one whose gangs are expected to end closest to when the pod
//    does, so a node's GPUs come free together and whole nodes (and racks)
//    reappear sooner.
// Pure functions of one node's state and one pod, so they plug into any
// placement structure; thread-safe.
#ifndef PHALANX_CORE_NODE_SCORE_H_
#define PHALANX_CORE_NODE_SCORE_H_

#include <tuple>

#include "absl/time/time.h"

namespace phalanx::core {

// What a scorer sees of one node.
struct ScoredNode {
  int gpu_count = 0;  // GPUs the node has
  int free_gpus = 0;  // free now
  // The latest expected end of the gangs on the node; InfinitePast when
  // none runs there, InfiniteFuture when one has no estimate.
  absl::Time latest_end = absl::InfinitePast();
};

// What a scorer sees of the pods to place on it.
struct ScoredPod {
  int gpus = 0;  // GPUs of the pods going there together
  // now + the gang's estimated runtime; InfiniteFuture without one.
  absl::Time expected_end = absl::InfiniteFuture();
};

// GPUs of `free` a typical pod could not use: Σ over the common pod sizes
// (1, 2, 4 GPUs and a whole node, equally likely) of `free` when that size
// does not fit, 0 when it does. 0 for an empty or a whole free node.
double UnusableGpus(int free, int gpu_count);

// The change in UnusableGpus when `pod` takes its GPUs from `node` (lower
// is better; negative when it tidies a fragment up).
double FragmentationDelta(const ScoredNode& node, const ScoredPod& pod);

// |the node's latest end − the pod's end| in seconds; a node where nothing
// runs (or with an unknown end, or a pod without an estimate) scores the
// largest gap, so a known close end always wins.
double EndGapSeconds(const ScoredNode& node, const ScoredPod& pod);

// The order the enabled stages put nodes in: lower first; each stage off
// leaves its place 0, and best fit (fewest free GPUs) breaks what they
// tie.
struct NodeRank {
  double fragmentation = 0;
  double end_gap = 0;
  int free_gpus = 0;
  bool operator<(const NodeRank& o) const {
    return std::tie(fragmentation, end_gap, free_gpus) <
           std::tie(o.fragmentation, o.end_gap, o.free_gpus);
  }
};
NodeRank RankNode(const ScoredNode& node, const ScoredPod& pod,
                  bool fragmentation, bool end_time);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_NODE_SCORE_H_
