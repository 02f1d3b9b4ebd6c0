#include "core/repair.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/check.h"

namespace phalanx::core {
namespace {

// Nodes [begin, end) in fleet order.
struct NodeRange {
  int begin = 0;
  int end = 0;
};

// One way to try placing a pod set's moved pods: inside `range`, under
// `topology`.
struct Try {
  NodeRange range;
  TopologyConstraint topology;
};

// The pods of one pod set: those that stay and those that must move.
struct PodSetSplit {
  const PodSetSpec* set = nullptr;
  std::vector<int> staying_slots;
  std::vector<size_t> moved;  // indices into the gang's placement
};

// The node range of the domain at `level` that holds every slot in
// `slots`, or nullopt when they span several (or there are none). The node
// level (levels().size()) is one node.
std::optional<NodeRange> SharedDomain(const Fleet& fleet, int level,
                                      const std::vector<int>& slots) {
  if (slots.empty()) return std::nullopt;
  const auto [lo, hi] = std::minmax_element(slots.begin(), slots.end());
  if (level == static_cast<int>(fleet.levels().size())) {
    if (*lo != *hi) return std::nullopt;
    return NodeRange{*lo, *lo + 1};
  }
  for (int domain : fleet.DomainsAtLevel(level)) {
    const Fleet::Domain& d = fleet.domains()[domain];
    if (d.node_begin <= *lo && *lo < d.node_end) {
      if (*hi >= d.node_end) return std::nullopt;
      return NodeRange{d.node_begin, d.node_end};
    }
  }
  return std::nullopt;
}

// The ways to place a pod set's moved pods, to be tried in order.
std::vector<Try> TriesFor(const Fleet& fleet, const PodSetSplit& split) {
  const NodeRange whole{0, static_cast<int>(fleet.slots().size())};
  const TopologyConstraint& topo = split.set->topology;
  if (topo.mode == TopologyMode::kUnconstrained) return {{whole, topo}};
  const int level = fleet.LevelIndex(topo.level);
  PHALANX_CHECK(level >= 0);
  if (split.staying_slots.empty()) return {{whole, topo}};
  std::vector<Try> tries;
  if (topo.mode == TopologyMode::kRequired) {
    // The other pods already fix the domain; none outside it will do.
    if (auto range = SharedDomain(fleet, level, split.staying_slots)) {
      tries.push_back({*range, topo});
    }
    return tries;
  }
  // PREFERRED: the set's current domain first, then wider ones holding all
  // its other pods, then a fresh PREFERRED placement anywhere.
  for (int l = level; l >= 0; --l) {
    if (auto range = SharedDomain(fleet, l, split.staying_slots)) {
      const std::string& name = l == static_cast<int>(fleet.levels().size())
                                    ? std::string(kNodeLevel)
                                    : fleet.levels()[l];
      tries.push_back({*range, {TopologyMode::kRequired, name}});
    }
  }
  tries.push_back({whole, topo});
  return tries;
}

// Splits the gang's pods by pod set into those that stay and those that
// move, in pod-set order; pod sets with nothing to move are left out.
std::vector<PodSetSplit> SplitPods(const Gang& gang, const Fleet& fleet,
                                   const std::vector<char>& vacate) {
  std::vector<PodSetSplit> splits;
  for (const PodSetSpec& set : gang.spec.pod_sets) {
    PodSetSplit split{&set, {}, {}};
    for (size_t i = 0; i < gang.placement.size(); ++i) {
      const PodPlacement& pod = gang.placement[i];
      if (pod.pod_set != set.name) continue;
      if (PodMustMove(fleet, vacate, pod)) {
        split.moved.push_back(i);
      } else {
        split.staying_slots.push_back(fleet.Find(pod.node));
      }
    }
    if (!split.moved.empty()) splits.push_back(std::move(split));
  }
  return splits;
}

// A gang of just the moved pods of one pod set; a gang that does not mix
// models keeps `model` when it has one (pods of it stay, or were placed).
GangSpec MovedSpec(const Gang& gang, const PodSetSplit& split,
                   const std::optional<std::string>& model) {
  GangSpec spec;
  spec.queue = gang.spec.queue;
  spec.priority = gang.spec.priority;
  spec.allow_mixed_models = gang.spec.allow_mixed_models;
  PodSetSpec set = *split.set;
  set.count = static_cast<int>(split.moved.size());
  if (!gang.spec.allow_mixed_models && model) set.gpu_models = {*model};
  spec.pod_sets.push_back(std::move(set));
  return spec;
}

// Places the moved pods of one pod set, trying each way in order.
PlacementResult PlaceMoved(const GangSpec& spec, const PodSetSplit& split,
                           Fleet& fleet, const RepairOptions& options) {
  PlacementResult last;
  for (const Try& t : TriesFor(fleet, split)) {
    GangSpec attempt = spec;
    attempt.pod_sets[0].topology = t.topology;
    PlacementOptions placement;
    placement.first_fit = options.first_fit;
    placement.model_gate = options.model_gate;
    placement.node_allowed = [&options, range = t.range](int slot) {
      return slot >= range.begin && slot < range.end && !options.vacate[slot] &&
             (options.allowed.empty() || options.allowed[slot]);
    };
    last = PlaceGang(attempt, fleet, placement);
    if (last.placed) return last;
  }
  if (last.reason.empty()) {
    last.reason = "its other pods span several domains";
  }
  return last;
}

const std::string& ModelOf(const Fleet& fleet, const NodeId& node) {
  const int slot = fleet.Find(node);
  PHALANX_CHECK(slot >= 0);
  return fleet.slots()[slot].node.spec.gpu_model;
}

// The GPU model of the gang's pods that stay, if any stays.
std::optional<std::string> StayingModel(const Gang& gang, const Fleet& fleet,
                                        const std::vector<char>& vacate) {
  for (const PodPlacement& pod : gang.placement) {
    if (!PodMustMove(fleet, vacate, pod)) return ModelOf(fleet, pod.node);
  }
  return std::nullopt;
}

// Why `gate` refuses the GPUs of all moved pods together, by model, or "".
// (Each pod set was gated alone; together they may ask for more.)
std::string GateAll(const ModelGate& gate, const Fleet& fleet,
                    const std::vector<PodPlacement>& pods) {
  if (!gate) return "";
  std::map<std::string, int64_t> gpus;
  for (const PodPlacement& pod : pods) {
    gpus[ModelOf(fleet, pod.node)] +=
        static_cast<int64_t>(pod.gpu_indices.size());
  }
  for (const auto& [model, count] : gpus) {
    if (std::string why = gate(model, count); !why.empty()) return why;
  }
  return "";
}

}  // namespace

bool PodMustMove(const Fleet& fleet, const std::vector<char>& vacate,
                 const PodPlacement& pod) {
  const int slot = fleet.Find(pod.node);
  PHALANX_CHECK(slot >= 0);
  if (vacate[slot]) return true;
  const uint64_t bad = fleet.slots()[slot].node.unhealthy_gpu_mask;
  return std::any_of(pod.gpu_indices.begin(), pod.gpu_indices.end(),
                     [bad](int gpu) { return (bad >> gpu & 1) != 0; });
}

RepairResult PlanRepair(const Gang& gang, Fleet& fleet,
                        const RepairOptions& options) {
  PHALANX_CHECK(options.vacate.size() == fleet.slots().size());
  RepairResult result;
  result.placement = gang.placement;
  if (gang.placement.empty()) {
    result.repaired = true;
    return result;
  }
  // A gang moved whole may change model (still one for all its pods).
  std::optional<std::string> model = StayingModel(gang, fleet, options.vacate);
  // Pod sets are placed one after another; each holds its new pods under a
  // probe gang so that the next one sees them taken, and all are released
  // at the end.
  Gang probe;
  probe.id = GangId("\x01repair");
  probe.spec = gang.spec;
  std::vector<PodPlacement> taken;
  for (const PodSetSplit& split : SplitPods(gang, fleet, options.vacate)) {
    // Not accepted by validation yet; never claim to keep what is not
    // checked.
    if (split.set->slice.size != 0 || !split.set->group.empty()) {
      result.reason = absl::StrCat("pod set ", split.set->name,
                                   ": slices and groups are not repaired");
      break;
    }
    PlacementResult placed =
        PlaceMoved(MovedSpec(gang, split, model), split, fleet, options);
    if (!placed.placed) {
      result.reason =
          absl::StrCat("pod set ", split.set->name, ": ", placed.reason);
      break;
    }
    PHALANX_CHECK(fleet.Allocate(probe, kNoGang, placed.pods).ok());
    if (!model) model = ModelOf(fleet, placed.pods.front().node);
    for (size_t k = 0; k < split.moved.size(); ++k) {
      PodPlacement& pod = result.placement[split.moved[k]];
      pod.node = placed.pods[k].node;
      pod.gpu_indices = placed.pods[k].gpu_indices;
    }
    result.moved_pods += static_cast<int>(split.moved.size());
    taken.insert(taken.end(), placed.pods.begin(), placed.pods.end());
  }
  if (result.reason.empty()) {
    result.reason = GateAll(options.model_gate, fleet, taken);
  }
  fleet.Release(probe, kNoGang, taken);
  result.repaired = result.reason.empty();
  if (!result.repaired) {
    result.placement = gang.placement;
    result.moved_pods = 0;
  }
  return result;
}

}  // namespace phalanx::core
