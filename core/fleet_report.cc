#include "core/fleet_report.h"

#include <algorithm>

#include "core/bits.h"

namespace phalanx::core {
namespace {

bool Ready(const Fleet::Slot& slot) {
  return slot.node.state == NodeState::kReady;
}

bool WholeFree(const Fleet::Slot& slot) {
  return Ready(slot) && slot.FreeGpus() == slot.node.spec.gpu_count;
}

void CountGpus(const Fleet::Slot& slot, GpuCounts& counts) {
  const int64_t free = slot.FreeGpus();
  const int64_t bad = CountOnes(slot.node.unhealthy_gpu_mask);
  const int64_t used = slot.node.spec.gpu_count - free - bad;
  if (slot.node.state != NodeState::kUnhealthy) counts.unhealthy += bad;
  switch (slot.node.state) {
    case NodeState::kReady:
      counts.free += free;
      counts.allocated += used;
      break;
    case NodeState::kCordoned:
    case NodeState::kDraining:
      counts.unavailable += free;
      counts.allocated += used;
      break;
    case NodeState::kUnhealthy:
      counts.unhealthy += free + used + bad;
      break;
  }
}

}  // namespace

FleetReport DescribeFleet(const Fleet& fleet) {
  FleetReport report;
  const auto& slots = fleet.slots();
  // Prefix sums of whole-free nodes make every domain's count O(1).
  std::vector<int> whole(slots.size() + 1, 0);
  int64_t free_total = 0;
  int64_t free_on_partial = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    whole[i + 1] = whole[i] + (WholeFree(slots[i]) ? 1 : 0);
    CountGpus(slots[i], report.gpus_by_model[slots[i].node.spec.gpu_model]);
    if (!Ready(slots[i])) continue;
    free_total += slots[i].FreeGpus();
    if (!WholeFree(slots[i])) free_on_partial += slots[i].FreeGpus();
  }
  report.node_fragmentation =
      free_total == 0 ? 0.0 : static_cast<double>(free_on_partial) / free_total;

  const auto& domains = fleet.domains();
  std::vector<int> order;
  for (size_t l = 0; l < fleet.levels().size(); ++l) {
    const std::vector<int>& at_level = fleet.DomainsAtLevel(l);
    LevelFragmentation level{fleet.levels()[l], 0, 0};
    for (int d : at_level) {
      const Fleet::Domain& domain = domains[d];
      level.largest_free_whole_nodes =
          std::max(level.largest_free_whole_nodes,
                   whole[domain.node_end] - whole[domain.node_begin]);
    }
    const int all_whole = whole[slots.size()];
    level.stranded_whole_node_fraction =
        all_whole == 0
            ? 0.0
            : static_cast<double>(all_whole - level.largest_free_whole_nodes) /
                  all_whole;
    report.levels.push_back(level);
  }
  // Domains depth-first, parents before children.
  std::vector<int> stack(domains[0].child_domains.rbegin(),
                         domains[0].child_domains.rend());
  while (!stack.empty()) {
    const int d = stack.back();
    stack.pop_back();
    const Fleet::Domain& domain = domains[d];
    DomainReport out{domain.path,
                     fleet.levels()[domain.level],
                     domain.node_end - domain.node_begin,
                     0,
                     0,
                     whole[domain.node_end] - whole[domain.node_begin]};
    for (int i = domain.node_begin; i < domain.node_end; ++i) {
      out.gpus_total += slots[i].node.spec.gpu_count;
      if (Ready(slots[i])) out.gpus_free += slots[i].FreeGpus();
    }
    report.domains.push_back(std::move(out));
    stack.insert(stack.end(), domain.child_domains.rbegin(),
                 domain.child_domains.rend());
  }
  return report;
}

}  // namespace phalanx::core
