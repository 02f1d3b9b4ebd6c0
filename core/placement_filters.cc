#include "core/placement_filters.h"

#include <algorithm>

namespace phalanx::core {

bool ModelFilter(const PodRequest& request, const Fleet::Slot& slot) {
  if (request.model == nullptr) return true;
  if (request.model_index >= 0) return slot.model == request.model_index;
  return slot.node.spec.gpu_model == *request.model;
}

bool StateFilter(const PodRequest& request, const Fleet::Slot& slot) {
  return request.basis == CapacityBasis::kTotal ||
         slot.node.state == NodeState::kReady;
}

int64_t FitPods(const PodRequest& request, const Fleet::Slot& slot) {
  const PodSetSpec& set = request.set;
  const NodeSpec& node = slot.node.spec;
  const bool total = request.basis == CapacityBasis::kTotal;
  int64_t pods = set.count;
  if (set.gpus > 0) {
    const int free = total ? node.gpu_count : slot.FreeGpus();
    pods = std::min<int64_t>(pods, free / set.gpus);
  }
  if (set.cpu_millis > 0 && node.cpu_millis > 0) {
    const int64_t free = node.cpu_millis - (total ? 0 : slot.used_cpu_millis);
    pods = std::min(pods, std::max<int64_t>(free, 0) / set.cpu_millis);
  }
  if (set.memory_bytes > 0 && node.memory_bytes > 0) {
    const int64_t free =
        node.memory_bytes - (total ? 0 : slot.used_memory_bytes);
    pods = std::min(pods, std::max<int64_t>(free, 0) / set.memory_bytes);
  }
  return pods;
}

int64_t PodsOnNode(const PodRequest& request, const Fleet::Slot& slot) {
  // Cheapest first: a string compare, a state check, then the arithmetic.
  if (!ModelFilter(request, slot)) return 0;
  if (!StateFilter(request, slot)) return 0;
  return FitPods(request, slot);
}

}  // namespace phalanx::core
