#include "core/placement.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/check.h"

namespace phalanx::core {
namespace {

// Pods of `set` that fit on `slot` (clamped to the set's count).
int64_t PodsOnNode(const Fleet::Slot& slot, const PodSetSpec& set,
                   const std::string* model, CapacityBasis basis) {
  const NodeSpec& node = slot.node.spec;
  if (model != nullptr && node.gpu_model != *model) return 0;
  const bool total = basis == CapacityBasis::kTotal;
  if (!total && slot.node.state != NodeState::kReady) return 0;
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

// Places the pods of one pod set restricted to one GPU model (or any).
class PodSetPlacer {
 public:
  PodSetPlacer(const Fleet& fleet, const PodSetSpec& set,
               const std::string* model, const PlacementOptions& options)
      : fleet_(fleet),
        set_(set),
        basis_(options.basis),
        first_fit_(options.first_fit) {
    const auto& slots = fleet.slots();
    node_pods_.resize(slots.size());
    prefix_.assign(slots.size() + 1, 0);
    for (size_t i = 0; i < slots.size(); ++i) {
      const bool allowed = !options.node_allowed || options.node_allowed(i);
      node_pods_[i] = allowed ? PodsOnNode(slots[i], set, model, basis_) : 0;
      prefix_[i + 1] = prefix_[i] + node_pods_[i];
    }
  }

  // Returns pods per slot (slot, pods) in fill order, or nullopt with
  // `reason` set.
  std::optional<std::vector<std::pair<int, int>>> Place(std::string& reason) {
    const TopologyConstraint& topo = set_.topology;
    const int level = topo.mode == TopologyMode::kUnconstrained
                          ? -1
                          : fleet_.LevelIndex(topo.level);
    if (topo.mode == TopologyMode::kUnconstrained) return PackLeastFree(reason);
    PHALANX_CHECK(level >= 0);
    if (topo.mode == TopologyMode::kRequired) return Required(level, reason);
    for (int l = level; l >= 0; --l) {
      std::string ignored;
      if (auto fill = Required(l, ignored)) return fill;
    }
    if (DomainPods(0) >= set_.count) {
      fills_.clear();
      Fill(0, set_.count);
      return fills_;
    }
    reason = ShortBy("fleet", DomainPods(0));
    return std::nullopt;
  }

 private:
  int64_t DomainPods(int domain) const {
    const Fleet::Domain& d = fleet_.domains()[domain];
    return prefix_[d.node_end] - prefix_[d.node_begin];
  }

  std::string ShortBy(absl::string_view where, int64_t best) const {
    if (basis_ == CapacityBasis::kTotal) {
      return absl::StrCat("can never fit: the largest ", where, " holds ", best,
                          " of ", set_.count, " pods of ", set_.gpus, " GPUs");
    }
    return absl::StrCat("NO_FIT at level ", where, ": largest free ", where,
                        " fits ", best, " of ", set_.count, " pods");
  }

  // Every pod inside one domain at `level` (levels().size() = one node).
  std::optional<std::vector<std::pair<int, int>>> Required(
      int level, std::string& reason) {
    const int depth = static_cast<int>(fleet_.levels().size());
    fills_.clear();
    if (level == depth) {
      const int slot =
          Tightest(0, static_cast<int>(node_pods_.size()), -1, set_.count);
      if (slot < 0) {
        reason = ShortBy(kNodeLevel, *std::max_element(node_pods_.begin(),
                                                       node_pods_.end()));
        return std::nullopt;
      }
      fills_.emplace_back(slot, set_.count);
      return fills_;
    }
    // Best fit: the domain that leaves the least capacity behind.
    int best = -1;
    int64_t best_pods = 0;
    int64_t largest = 0;
    for (int domain : fleet_.DomainsAtLevel(level)) {
      const int64_t pods = DomainPods(domain);
      largest = std::max(largest, pods);
      if (pods >= set_.count && (best < 0 || pods < best_pods)) {
        if (first_fit_ && best >= 0) continue;
        best = domain;
        best_pods = pods;
      }
    }
    if (best < 0) {
      reason = ShortBy(fleet_.levels()[level], largest);
      return std::nullopt;
    }
    Fill(best, set_.count);
    return fills_;
  }

  // Index in [begin, end) of the node with the fewest pods >= `need`,
  // skipping `exclude`; -1 if none.
  int Tightest(int begin, int end, int exclude, int64_t need) const {
    int best = -1;
    for (int i = begin; i < end; ++i) {
      if (i == exclude || node_pods_[i] < need) continue;
      if (first_fit_) return i;
      if (best < 0 || node_pods_[i] < node_pods_[best]) best = i;
    }
    return best;
  }

  // Puts `count` pods into `domain`: children with the most capacity first,
  // the last child chosen as the one that fits the remainder most tightly.
  void Fill(int domain, int64_t count) {
    const Fleet::Domain& d = fleet_.domains()[domain];
    if (d.child_domains.empty()) {
      FillNodes(d.node_begin, d.node_end, count);
      return;
    }
    std::vector<int64_t> left;
    for (int child : d.child_domains) left.push_back(DomainPods(child));
    if (first_fit_) {
      for (size_t i = 0; i < left.size() && count > 0; ++i) {
        const int64_t take = std::min(count, left[i]);
        if (take > 0) Fill(d.child_domains[i], take);
        count -= take;
      }
      return;
    }
    while (count > 0) {
      int pick = -1;
      for (size_t i = 0; i < left.size(); ++i) {
        if (left[i] >= count && (pick < 0 || left[i] < left[pick])) pick = i;
      }
      if (pick >= 0) {
        Fill(d.child_domains[pick], count);
        return;
      }
      pick = static_cast<int>(std::max_element(left.begin(), left.end()) -
                              left.begin());
      PHALANX_CHECK(left[pick] > 0);
      Fill(d.child_domains[pick], left[pick]);
      count -= left[pick];
      left[pick] = 0;
    }
  }

  // Same rule at the node level: a node the remainder fills exactly (or most
  // tightly) is taken last, so whole nodes stay whole.
  void FillNodes(int begin, int end, int64_t count) {
    std::vector<int64_t> left(node_pods_.begin() + begin,
                              node_pods_.begin() + end);
    if (first_fit_) {
      for (size_t i = 0; i < left.size() && count > 0; ++i) {
        const int64_t take = std::min(count, left[i]);
        if (take > 0) fills_.emplace_back(begin + i, static_cast<int>(take));
        count -= take;
      }
      return;
    }
    while (count > 0) {
      int pick = -1;
      for (size_t i = 0; i < left.size(); ++i) {
        if (left[i] >= count && (pick < 0 || left[i] < left[pick])) pick = i;
      }
      if (pick >= 0) {
        fills_.emplace_back(begin + pick, static_cast<int>(count));
        return;
      }
      pick = static_cast<int>(std::max_element(left.begin(), left.end()) -
                              left.begin());
      PHALANX_CHECK(left[pick] > 0);
      fills_.emplace_back(begin + pick, static_cast<int>(left[pick]));
      count -= left[pick];
      left[pick] = 0;
    }
  }

  // UNCONSTRAINED: fill the least-free nodes first (pack into fragments).
  std::optional<std::vector<std::pair<int, int>>> PackLeastFree(
      std::string& reason) {
    if (DomainPods(0) < set_.count) {
      reason = basis_ == CapacityBasis::kTotal
                   ? absl::StrCat("can never fit: the fleet holds ",
                                  DomainPods(0), " of ", set_.count,
                                  " pods of ", set_.gpus, " GPUs")
                   : absl::StrCat("NO_FIT: free capacity fits ", DomainPods(0),
                                  " of ", set_.count, " pods");
      return std::nullopt;
    }
    std::vector<int> order;
    for (size_t i = 0; i < node_pods_.size(); ++i) {
      if (node_pods_[i] > 0) order.push_back(static_cast<int>(i));
    }
    const auto& slots = fleet_.slots();
    if (!first_fit_) {
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return slots[a].FreeGpus() < slots[b].FreeGpus();
      });
    }
    fills_.clear();
    int64_t count = set_.count;
    for (int slot : order) {
      const int64_t take = std::min(count, node_pods_[slot]);
      fills_.emplace_back(slot, static_cast<int>(take));
      count -= take;
      if (count == 0) break;
    }
    return fills_;
  }

  const Fleet& fleet_;
  const PodSetSpec& set_;
  const CapacityBasis basis_;
  const bool first_fit_;
  std::vector<int64_t> node_pods_;
  std::vector<int64_t> prefix_;
  std::vector<std::pair<int, int>> fills_;
};

// Turns pods-per-slot into pod placements with the lowest free GPU indices.
std::vector<PodPlacement> AssignGpus(
    const Fleet& fleet, const PodSetSpec& set,
    const std::vector<std::pair<int, int>>& fills, CapacityBasis basis) {
  std::vector<PodPlacement> pods;
  int index = 0;
  for (const auto& [slot_index, count] : fills) {
    const Fleet::Slot& slot = fleet.slots()[slot_index];
    uint64_t used = basis == CapacityBasis::kTotal ? 0 : slot.used_gpu_mask;
    for (int p = 0; p < count; ++p) {
      PodPlacement pod{set.name, index++, slot.node.spec.id, {}};
      for (int gpu = 0; static_cast<int>(pod.gpu_indices.size()) < set.gpus;
           ++gpu) {
        if (used >> gpu & 1) continue;
        used |= uint64_t{1} << gpu;
        pod.gpu_indices.push_back(gpu);
      }
      pods.push_back(std::move(pod));
    }
  }
  return pods;
}

// The model lists to try: each entry restricts every pod set to one model
// (nullptr = no restriction, for gangs that allow mixed models).
std::vector<const std::string*> ModelChoices(
    const GangSpec& spec, const std::vector<std::string>& fleet_models) {
  if (spec.allow_mixed_models) return {nullptr};
  const std::vector<std::string>* order = &fleet_models;
  for (const PodSetSpec& set : spec.pod_sets) {
    if (!set.gpu_models.empty()) {
      order = &set.gpu_models;
      break;
    }
  }
  std::vector<const std::string*> choices;
  for (const std::string& model : *order) {
    const bool everyone_accepts = std::all_of(
        spec.pod_sets.begin(), spec.pod_sets.end(), [&](const PodSetSpec& set) {
          return set.gpu_models.empty() ||
                 std::find(set.gpu_models.begin(), set.gpu_models.end(),
                           model) != set.gpu_models.end();
        });
    if (everyone_accepts) choices.push_back(&model);
  }
  return choices;
}

// Places every pod set with `model` (and, when mixing is allowed, each pod
// set's own preference list). Allocates tentatively under `probe`.
PlacementResult PlaceWithModel(const GangSpec& spec, Fleet& fleet,
                               const std::string* model,
                               const PlacementOptions& options, Gang& probe) {
  const CapacityBasis basis = options.basis;
  PlacementResult result;
  for (const PodSetSpec& set : spec.pod_sets) {
    std::vector<const std::string*> models = {model};
    if (model == nullptr && !set.gpu_models.empty()) {
      models.clear();
      for (const std::string& m : set.gpu_models) models.push_back(&m);
    }
    std::optional<std::vector<std::pair<int, int>>> fills;
    std::string reason;
    for (const std::string* m : models) {
      std::string why;
      fills = PodSetPlacer(fleet, set, m, options).Place(why);
      if (fills) break;
      if (reason.empty()) reason = why;
    }
    if (!fills) {
      result.reason = spec.pod_sets.size() > 1
                          ? absl::StrCat("pod set ", set.name, ": ", reason)
                          : reason;
      break;
    }
    std::vector<PodPlacement> pods = AssignGpus(fleet, set, *fills, basis);
    if (basis == CapacityBasis::kFree) {
      PHALANX_CHECK(fleet.Allocate(probe, pods).ok());
    }
    result.pods.insert(result.pods.end(), pods.begin(), pods.end());
  }
  if (basis == CapacityBasis::kFree) fleet.Release(probe, result.pods);
  result.placed = result.reason.empty();
  if (!result.placed) result.pods.clear();
  return result;
}

// The reason `gate` refuses the GPUs of a placement that mixes models, or "".
std::string GateMixed(const ModelGate& gate, const Fleet& fleet,
                      const std::vector<PodPlacement>& pods) {
  std::map<std::string, int64_t> gpus;
  for (const PodPlacement& pod : pods) {
    gpus[fleet.slots()[fleet.Find(pod.node)].node.spec.gpu_model] +=
        static_cast<int64_t>(pod.gpu_indices.size());
  }
  for (const auto& [model, count] : gpus) {
    if (std::string why = gate(model, count); !why.empty()) return why;
  }
  return "";
}

}  // namespace

PlacementResult PlaceGang(const GangSpec& spec, Fleet& fleet,
                          const PlacementOptions& options) {
  const CapacityBasis basis = options.basis;
  Gang probe;
  probe.id = GangId("\x01probe");
  probe.spec = spec;
  const std::vector<std::string>& fleet_models = fleet.Models();
  PlacementResult first_failure;
  for (const std::string* model : ModelChoices(spec, fleet_models)) {
    if (model != nullptr && options.model_gate) {
      std::string why = options.model_gate(*model, spec.TotalGpus());
      if (!why.empty()) {
        if (first_failure.reason.empty()) first_failure.reason = why;
        continue;
      }
    }
    PlacementResult result = PlaceWithModel(spec, fleet, model, options, probe);
    if (result.placed && model == nullptr && options.model_gate) {
      result.reason = GateMixed(options.model_gate, fleet, result.pods);
      result.placed = result.reason.empty();
      if (!result.placed) result.pods.clear();
    }
    if (result.placed) return result;
    if (first_failure.reason.empty()) {
      first_failure = std::move(result);
      if (model != nullptr && fleet_models.size() > 1) {
        first_failure.reason = absl::StrCat(*model, ": ", first_failure.reason);
      }
    }
  }
  if (first_failure.reason.empty()) {
    first_failure.reason = basis == CapacityBasis::kTotal
                               ? "can never fit: no node has an acceptable "
                                 "GPU model"
                               : "NO_FIT: no node has an acceptable GPU model";
  }
  return first_failure;
}

}  // namespace phalanx::core
