// Placement's filter stages: whether a node may take pods of one pod set at
// all, and how many fit. Each stage is one small function of (request,
// node); PodsOnNode chains them in the order the placer relies on
// (cheapest first: a node refused by its model or state is never sized).
// Pure functions; thread-compatible.
#ifndef PHALANX_CORE_PLACEMENT_FILTERS_H_
#define PHALANX_CORE_PLACEMENT_FILTERS_H_

#include <cstdint>
#include <string>

#include "core/fleet.h"
#include "core/model.h"

namespace phalanx::core {

// Which resources a placement may use.
enum class CapacityBasis {
  kFree,   // free resources of READY nodes (admission, dry run)
  kTotal,  // all resources of every node (can the gang ever fit?)
};

// What the filters ask of a node for one pod set.
struct PodRequest {
  const PodSetSpec& set;
  const std::string* model;  // the GPU model the pods must use; null = any
  CapacityBasis basis;
  // The index of *model in the fleet's Models() (Fleet::Slot::model), or
  // -1 to compare model names.
  int model_index = -1;
};

// Stage "gpu_model": the node has the requested GPU model (any, when none
// is requested).
bool ModelFilter(const PodRequest& request, const Fleet::Slot& slot);

// Stage "node_state": the node is READY, unless the basis is every
// resource (can it ever fit), where every node counts.
bool StateFilter(const PodRequest& request, const Fleet::Slot& slot);

// Stage "resources": how many pods of the set (at most its count) the
// node's GPUs, CPU and memory hold on the basis. A node that does not
// declare CPU or memory (0) is not limited by it.
int64_t FitPods(const PodRequest& request, const Fleet::Slot& slot);

// The filter chain: 0 when a filter refuses the node, else FitPods.
int64_t PodsOnNode(const PodRequest& request, const Fleet::Slot& slot);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_PLACEMENT_FILTERS_H_
