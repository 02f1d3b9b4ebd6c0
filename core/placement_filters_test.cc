// The filter stages of placement, one table each: which nodes a pod set may
// use and how many of its pods fit there.
#include "core/placement_filters.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

// A node of `gpus` GPUs (the lowest `used` of them taken), `cpu` and
// `memory` (0 = not declared, with `used_cpu` / `used_memory` taken).
Fleet::Slot Node(const std::string& model, int gpus, int used,
                 NodeState state = NodeState::kReady, int64_t cpu = 0,
                 int64_t used_cpu = 0, int64_t memory = 0,
                 int64_t used_memory = 0) {
  Fleet::Slot slot;
  slot.node.spec.id = NodeId("n");
  slot.node.spec.gpu_model = model;
  slot.node.spec.gpu_count = gpus;
  slot.node.spec.cpu_millis = cpu;
  slot.node.spec.memory_bytes = memory;
  slot.node.state = state;
  slot.used_gpu_mask = (uint64_t{1} << used) - 1;
  slot.used_cpu_millis = used_cpu;
  slot.used_memory_bytes = used_memory;
  return slot;
}

PodSetSpec Set(int count, int gpus, int64_t cpu = 0, int64_t memory = 0) {
  PodSetSpec set;
  set.name = "workers";
  set.count = count;
  set.gpus = gpus;
  set.cpu_millis = cpu;
  set.memory_bytes = memory;
  return set;
}

TEST(PlacementFiltersTest, ModelAndState) {
  const std::string h100 = "H100";
  struct Case {
    std::string name;
    Fleet::Slot slot;
    const std::string* model;
    CapacityBasis basis;
    bool model_ok;
    bool state_ok;
  };
  const std::vector<Case> cases = {
      {"any model, ready", Node("H200", 8, 0), nullptr, CapacityBasis::kFree,
       true, true},
      {"model matches", Node("H100", 8, 0), &h100, CapacityBasis::kFree, true,
       true},
      {"other model", Node("H200", 8, 0), &h100, CapacityBasis::kFree, false,
       true},
      {"unhealthy on free capacity", Node("H100", 8, 0, NodeState::kUnhealthy),
       &h100, CapacityBasis::kFree, true, false},
      {"unhealthy still counts for ever fits",
       Node("H100", 8, 0, NodeState::kUnhealthy), &h100, CapacityBasis::kTotal,
       true, true},
      {"draining on free capacity", Node("H100", 8, 0, NodeState::kDraining),
       nullptr, CapacityBasis::kFree, true, false},
  };
  const PodSetSpec set = Set(1, 1);
  for (const Case& c : cases) {
    const PodRequest request{set, c.model, c.basis};
    EXPECT_EQ(ModelFilter(request, c.slot), c.model_ok) << c.name;
    EXPECT_EQ(StateFilter(request, c.slot), c.state_ok) << c.name;
    if (!c.model_ok || !c.state_ok) {
      EXPECT_EQ(PodsOnNode(request, c.slot), 0) << c.name;
    }
  }
}

TEST(PlacementFiltersTest, FitPods) {
  struct Case {
    std::string name;
    Fleet::Slot slot;
    PodSetSpec set;
    CapacityBasis basis;
    int64_t pods;
  };
  const std::vector<Case> cases = {
      {"free GPUs divide", Node("H100", 8, 2), Set(4, 2), CapacityBasis::kFree,
       3},
      {"clamped to the count", Node("H100", 8, 0), Set(2, 1),
       CapacityBasis::kFree, 2},
      {"every GPU on the total basis", Node("H100", 8, 8), Set(4, 4),
       CapacityBasis::kTotal, 2},
      {"too few GPUs", Node("H100", 8, 5), Set(1, 4), CapacityBasis::kFree, 0},
      {"CPU binds first", Node("H100", 8, 0, NodeState::kReady, 10'000, 4'000),
       Set(8, 1, 2'000), CapacityBasis::kFree, 3},
      {"CPU not declared does not bind", Node("H100", 8, 0), Set(8, 1, 2'000),
       CapacityBasis::kFree, 8},
      {"memory binds first",
       Node("H100", 8, 0, NodeState::kReady, 0, 0, 100, 70), Set(8, 1, 0, 10),
       CapacityBasis::kFree, 3},
      {"CPU overcommitted counts as none",
       Node("H100", 8, 0, NodeState::kReady, 1'000, 2'000), Set(1, 1, 1),
       CapacityBasis::kFree, 0},
      {"CPU-only pods", Node("H100", 8, 8, NodeState::kReady, 8'000),
       Set(10, 0, 1'000), CapacityBasis::kFree, 8},
  };
  for (const Case& c : cases) {
    const PodRequest request{c.set, nullptr, c.basis};
    EXPECT_EQ(FitPods(request, c.slot), c.pods) << c.name;
    EXPECT_EQ(PodsOnNode(request, c.slot), c.pods) << c.name;
  }
}

}  // namespace
}  // namespace phalanx::core
