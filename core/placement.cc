#include "core/placement.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
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

using Fills = std::vector<std::pair<int, int>>;  // (slot, pods) in fill order

// Places the pods of one pod set restricted to one GPU model (or any).
//
// Counting is indexed when the basis is free capacity, pods need GPUs and a
// node filter names the slots it restricts: a domain's pods then come from
// the fleet's free index (a few histogram cells, not its nodes), least-free
// packing walks the index's free-GPU buckets instead of sorting the fleet,
// and only the chosen domain's nodes are visited. Otherwise (every GPU free,
// for "can it ever fit"; CPU-only pods; a filter over every slot) each node's
// pods are counted once up front. Both count exactly the same pods.
class PodSetPlacer {
 public:
  PodSetPlacer(const Fleet& fleet, const PodSetSpec& set,
               const std::string* model, const PlacementOptions& options)
      : fleet_(fleet),
        index_(fleet.free_index()),
        set_(set),
        model_(model),
        basis_(options.basis),
        first_fit_(options.first_fit),
        slice_level_(set.slice.size > 0 ? fleet.LevelIndex(set.slice.level)
                                        : -1),
        indexed_(
            options.basis == CapacityBasis::kFree && set.gpus > 0 &&
            (!options.node_allowed || options.restricted_slots != nullptr)) {
    if (indexed_) {
      PrepareIndexed(options);
    } else {
      CountEveryNode(options);
    }
  }

  // Returns pods per slot in fill order, or nullopt with `reason` set.
  std::optional<Fills> Place(std::string& reason) {
    const TopologyConstraint& topo = set_.topology;
    if (Sliced()) return PlaceSlices(reason);
    if (topo.mode == TopologyMode::kUnconstrained) return PackLeastFree(reason);
    const int level = fleet_.LevelIndex(topo.level);
    PHALANX_CHECK(level >= 0);
    if (topo.mode == TopologyMode::kRequired) return Required(level, reason);
    for (int l = level; l >= 0; --l) {
      std::string ignored;
      if (auto fill = Required(l, ignored)) return fill;
    }
    const int64_t fleet_pods = DomainPods(0);
    if (fleet_pods >= set_.count) {
      fills_.clear();
      Fill(0, set_.count);
      return fills_;
    }
    reason = ShortBy("fleet", fleet_pods);
    return std::nullopt;
  }

  // Every pod inside `domain` (the shared domain of a pod-set group).
  std::optional<Fills> PlaceIn(int domain, std::string& reason) {
    fills_.clear();
    const int64_t left = Leftover(domain);
    if (left < 0) {
      reason = absl::StrCat("short by ", -left, Sliced() ? " slices" : " pods",
                            " in ", DomainName(domain));
      return std::nullopt;
    }
    if (Sliced()) {
      FillSlices(domain, set_.count / set_.slice.size);
    } else {
      Fill(domain, set_.count);
    }
    return fills_;
  }

  // What `domain` holds beyond the set (in slices when sliced); negative
  // when the set does not fit there.
  int64_t Leftover(int domain) const {
    if (Sliced()) {
      return DomainSlices(domain) - set_.count / set_.slice.size;
    }
    return DomainPods(domain) - set_.count;
  }

 private:
  std::string DomainName(int domain) const {
    const std::string& path = fleet_.domains()[domain].path;
    return path.empty() ? "the fleet" : path;
  }

  void CountEveryNode(const PlacementOptions& options) {
    const auto& slots = fleet_.slots();
    node_pods_.resize(slots.size());
    prefix_.assign(slots.size() + 1, 0);
    for (size_t i = 0; i < slots.size(); ++i) {
      const bool allowed = !options.node_allowed || options.node_allowed(i);
      node_pods_[i] = allowed ? PodsOnNode(slots[i], set_, model_, basis_) : 0;
      prefix_[i + 1] = prefix_[i] + node_pods_[i];
    }
  }

  void PrepareIndexed(const PlacementOptions& options) {
    model_index_ =
        model_ == nullptr ? index_.any_model() : fleet_.ModelIndex(*model_);
    cpu_per_gpu_ = static_cast<double>(set_.cpu_millis) / set_.gpus;
    memory_per_gpu_ = static_cast<double>(set_.memory_bytes) / set_.gpus;
    gpus_bind_everywhere_ =
        GpusBind(0, static_cast<int>(fleet_.slots().size()));
    if (options.restricted_slots == nullptr) return;
    for (int slot : *options.restricted_slots) {
      if (options.node_allowed(slot)) continue;
      excluded_.push_back(slot);
      const int64_t pods = IndexedPodsOnNode(slot);
      if (pods == 0) continue;
      for (int d = index_.LeafDomain(slot); d >= 0; d = index_.Parent(d)) {
        excluded_pods_[d] += pods;
      }
    }
  }

  // Whether no node in slots [begin, end) runs out of CPU or memory for
  // this pod set before it runs out of GPUs.
  bool GpusBind(int begin, int end) const {
    return index_.MinCpuPerGpu(begin, end) >= cpu_per_gpu_ &&
           index_.MinMemoryPerGpu(begin, end) >= memory_per_gpu_;
  }

  // Pods the free index counts for `slot` (its GPUs alone decide).
  int64_t IndexedPodsOnNode(int slot) const {
    const Fleet::Slot& s = fleet_.slots()[slot];
    if (s.node.state != NodeState::kReady) return 0;
    if (model_ != nullptr && s.node.spec.gpu_model != *model_) return 0;
    return std::min<int64_t>(set_.count, s.FreeGpus() / set_.gpus);
  }

  bool Excluded(int slot) const {
    return std::binary_search(excluded_.begin(), excluded_.end(), slot);
  }

  // Pods of the set that fit on the node at `slot`.
  int64_t NodePods(int slot) const {
    if (!indexed_) return node_pods_[slot];
    if (model_index_ < 0 || Excluded(slot)) return 0;
    return PodsOnNode(fleet_.slots()[slot], set_, model_, basis_);
  }

  // Pods of the set that fit in `domain`.
  int64_t DomainPods(int domain) const {
    const Fleet::Domain& d = fleet_.domains()[domain];
    if (!indexed_) return prefix_[d.node_end] - prefix_[d.node_begin];
    if (model_index_ < 0) return 0;
    if (!gpus_bind_everywhere_ && !GpusBind(d.node_begin, d.node_end)) {
      int64_t pods = 0;
      for (int i = d.node_begin; i < d.node_end; ++i) pods += NodePods(i);
      return pods;
    }
    int64_t pods = 0;
    for (int free = set_.gpus; free <= index_.max_gpus(); ++free) {
      pods += index_.Nodes(domain, model_index_, free) *
              std::min<int64_t>(set_.count, free / set_.gpus);
    }
    if (auto it = excluded_pods_.find(domain); it != excluded_pods_.end()) {
      pods -= it->second;
    }
    return pods;
  }

  // Free GPUs of `slot` on the placement's basis.
  int FreeGpus(int slot) const {
    const Fleet::Slot& s = fleet_.slots()[slot];
    return basis_ == CapacityBasis::kTotal ? s.node.spec.gpu_count
                                           : s.FreeGpus();
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
  std::optional<Fills> Required(int level, std::string& reason) {
    const int depth = static_cast<int>(fleet_.levels().size());
    fills_.clear();
    if (level == depth) {
      const int slot = TightestNode(set_.count);
      if (slot < 0) {
        reason = ShortBy(kNodeLevel, LargestNodePods());
        return std::nullopt;
      }
      fills_.emplace_back(slot, set_.count);
      return fills_;
    }
    int64_t largest = 0;
    const int best = BestFit(
        fleet_.DomainsAtLevel(level), set_.count,
        [this](int domain) { return DomainPods(domain); }, largest);
    if (best < 0) {
      reason = ShortBy(fleet_.levels()[level], largest);
      return std::nullopt;
    }
    Fill(best, set_.count);
    return fills_;
  }

  // Best fit: of `domains`, the one whose `units` (pods or slices) leave the
  // least behind once `need` are taken (first fit: the first that holds
  // them); -1 when none does. Raises `largest` to the most any one holds.
  template <typename Units>
  int BestFit(const std::vector<int>& domains, int64_t need, const Units& units,
              int64_t& largest) const {
    int best = -1;
    int64_t best_units = 0;
    for (int domain : domains) {
      const int64_t held = units(domain);
      largest = std::max(largest, held);
      if (held < need || (best >= 0 && (first_fit_ || held >= best_units))) {
        continue;
      }
      best = domain;
      best_units = held;
    }
    return best;
  }

  // The node that fits `need` pods with the fewest free GPUs (ties: fleet
  // order; first fit: the first node that fits), or -1.
  int TightestNode(int64_t need) const {
    if (indexed_ && !first_fit_) {
      if (model_index_ < 0) return -1;
      const int64_t lowest = std::min<int64_t>(need * set_.gpus, kNoGpuLimit);
      for (int64_t free = lowest; free <= index_.max_gpus(); ++free) {
        for (int slot : index_.SlotsWithFree(model_index_, free)) {
          if (NodePods(slot) >= need) return slot;
        }
      }
      return -1;
    }
    int best = -1;
    for (int i = 0; i < static_cast<int>(fleet_.slots().size()); ++i) {
      if (NodePods(i) < need) continue;
      if (first_fit_) return i;
      if (best < 0 || FreeGpus(i) < FreeGpus(best)) best = i;
    }
    return best;
  }

  // The most pods any one node fits.
  int64_t LargestNodePods() const {
    int64_t largest = 0;
    if (!indexed_) {
      for (int64_t pods : node_pods_) largest = std::max(largest, pods);
      return largest;
    }
    if (model_index_ < 0) return 0;
    for (int free = index_.max_gpus(); free >= set_.gpus; --free) {
      if (std::min<int64_t>(set_.count, free / set_.gpus) <= largest) break;
      for (int slot : index_.SlotsWithFree(model_index_, free)) {
        largest = std::max(largest, NodePods(slot));
      }
    }
    return largest;
  }

  // Puts `count` pods into `domain`: children with the most capacity first,
  // the last child chosen as the one that fits the remainder most tightly;
  // the same at the node level, so whole nodes stay whole.
  void Fill(int domain, int64_t count) {
    const Fleet::Domain& d = fleet_.domains()[domain];
    std::vector<int64_t> left;
    if (d.child_domains.empty()) {
      for (int i = d.node_begin; i < d.node_end; ++i) {
        left.push_back(NodePods(i));
      }
      for (const auto& [i, pods] : Distribute(left, count)) {
        fills_.emplace_back(d.node_begin + i, static_cast<int>(pods));
      }
      return;
    }
    for (int child : d.child_domains) left.push_back(DomainPods(child));
    for (const auto& [i, pods] : Distribute(left, count)) {
      Fill(d.child_domains[i], pods);
    }
  }

  // Splits `count` units over parts that hold `left[i]` each: the part the
  // remainder fits most tightly, else the largest, until none is left (first
  // fit: in order). Returns (part, units) in fill order.
  std::vector<std::pair<int, int64_t>> Distribute(std::vector<int64_t> left,
                                                  int64_t count) const {
    std::vector<std::pair<int, int64_t>> parts;
    if (first_fit_) {
      for (size_t i = 0; i < left.size() && count > 0; ++i) {
        const int64_t take = std::min(count, left[i]);
        if (take > 0) parts.emplace_back(static_cast<int>(i), take);
        count -= take;
      }
      return parts;
    }
    while (count > 0) {
      int pick = -1;
      for (size_t i = 0; i < left.size(); ++i) {
        if (left[i] >= count && (pick < 0 || left[i] < left[pick])) pick = i;
      }
      if (pick >= 0) {
        parts.emplace_back(pick, count);
        return parts;
      }
      pick = static_cast<int>(std::max_element(left.begin(), left.end()) -
                              left.begin());
      PHALANX_CHECK(left[pick] > 0);
      parts.emplace_back(pick, left[pick]);
      count -= left[pick];
      left[pick] = 0;
    }
    return parts;
  }

  // Whether slices constrain more than the topology already does.
  bool Sliced() const {
    const int depth = static_cast<int>(fleet_.levels().size());
    return set_.slice.size > 1 && slice_level_ >= 0 &&
           (set_.topology.mode == TopologyMode::kUnconstrained ||
            fleet_.LevelIndex(set_.topology.level) < depth);
  }

  // Slices (docs/design.md §6): `slice.size` pods inside one domain at
  // `slice.level`. The best-fitting domain at the constraint's level (walking
  // up for PREFERRED; the fleet for UNCONSTRAINED) is sized in whole slices,
  // and slices are spread like pods: the largest parts first, the tightest
  // last.
  std::optional<Fills> PlaceSlices(std::string& reason) {
    const TopologyConstraint& topo = set_.topology;
    const int64_t need = set_.count / set_.slice.size;
    const int top = topo.mode == TopologyMode::kUnconstrained
                        ? -1
                        : fleet_.LevelIndex(topo.level);
    int64_t largest = 0;
    for (int level = top; level >= -1; --level) {
      const std::vector<int>& domains =
          level < 0 ? kFleetDomain : fleet_.DomainsAtLevel(level);
      const int best = BestFit(
          domains, need, [this](int domain) { return DomainSlices(domain); },
          largest);
      if (best >= 0) {
        fills_.clear();
        FillSlices(best, need);
        return fills_;
      }
      if (topo.mode == TopologyMode::kRequired) break;
    }
    const std::string where =
        topo.mode == TopologyMode::kRequired ? topo.level : "fleet";
    reason = absl::StrCat(
        basis_ == CapacityBasis::kTotal ? "can never fit: " : "NO_FIT: ",
        "the largest ", where, " holds ", largest, " of ", need, " slices of ",
        set_.slice.size, " pods in one ", set_.slice.level);
    return std::nullopt;
  }

  // Whole slices that fit in `domain`.
  int64_t DomainSlices(int domain) const {
    const Fleet::Domain& d = fleet_.domains()[domain];
    const int64_t size = set_.slice.size;
    if (d.level == slice_level_) return DomainPods(domain) / size;
    int64_t slices = 0;
    if (d.child_domains.empty()) {  // slices of one node each
      for (int i = d.node_begin; i < d.node_end; ++i) {
        slices += NodePods(i) / size;
      }
      return slices;
    }
    for (int child : d.child_domains) slices += DomainSlices(child);
    return slices;
  }

  // Puts `slices` whole slices into `domain`.
  void FillSlices(int domain, int64_t slices) {
    const Fleet::Domain& d = fleet_.domains()[domain];
    const int64_t size = set_.slice.size;
    if (d.level == slice_level_) {
      Fill(domain, slices * size);
      return;
    }
    std::vector<int64_t> left;
    if (d.child_domains.empty()) {
      for (int i = d.node_begin; i < d.node_end; ++i) {
        left.push_back(NodePods(i) / size);
      }
      for (const auto& [i, count] : Distribute(left, slices)) {
        fills_.emplace_back(d.node_begin + i, static_cast<int>(count * size));
      }
      return;
    }
    for (int child : d.child_domains) left.push_back(DomainSlices(child));
    for (const auto& [i, count] : Distribute(left, slices)) {
      FillSlices(d.child_domains[i], count);
    }
  }

  // UNCONSTRAINED: fill the least-free nodes first (pack into fragments).
  std::optional<Fills> PackLeastFree(std::string& reason) {
    const int64_t fleet_pods = DomainPods(0);
    if (fleet_pods < set_.count) {
      reason = basis_ == CapacityBasis::kTotal
                   ? absl::StrCat("can never fit: the fleet holds ", fleet_pods,
                                  " of ", set_.count, " pods of ", set_.gpus,
                                  " GPUs")
                   : absl::StrCat("NO_FIT: free capacity fits ", fleet_pods,
                                  " of ", set_.count, " pods");
      return std::nullopt;
    }
    fills_.clear();
    int64_t count = set_.count;
    auto take = [&](int slot) {
      const int64_t pods = std::min(count, NodePods(slot));
      if (pods > 0) fills_.emplace_back(slot, static_cast<int>(pods));
      count -= pods;
      return count == 0;
    };
    if (indexed_ && !first_fit_) {
      for (int free = set_.gpus; free <= index_.max_gpus(); ++free) {
        for (int slot : index_.SlotsWithFree(model_index_, free)) {
          if (take(slot)) return fills_;
        }
      }
      PHALANX_CHECK(false);  // DomainPods(0) promised enough
    }
    std::vector<int> order;
    for (size_t i = 0; i < fleet_.slots().size(); ++i) {
      if (NodePods(i) > 0) order.push_back(static_cast<int>(i));
    }
    if (!first_fit_) {
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return FreeGpus(a) < FreeGpus(b); });
    }
    for (int slot : order) {
      if (take(slot)) break;
    }
    return fills_;
  }

  inline static const std::vector<int> kFleetDomain = {0};
  // Bounds the free-GPU walk (no node has more GPUs than this).
  static constexpr int64_t kNoGpuLimit = 1 << 20;

  const Fleet& fleet_;
  const FreeIndex& index_;
  const PodSetSpec& set_;
  const std::string* model_;
  const CapacityBasis basis_;
  const bool first_fit_;
  const int slice_level_;  // -1 when the set is not sliced
  const bool indexed_;
  // Counted up front (not indexed).
  std::vector<int64_t> node_pods_;
  std::vector<int64_t> prefix_;
  // Indexed.
  int model_index_ = -1;
  double cpu_per_gpu_ = 0;
  double memory_per_gpu_ = 0;
  bool gpus_bind_everywhere_ = false;
  std::vector<int> excluded_;  // sorted slots the node filter refuses
  absl::flat_hash_map<int, int64_t> excluded_pods_;  // by domain
  Fills fills_;
};

// Turns pods-per-slot into pod placements with the lowest free GPU indices.
std::vector<PodPlacement> AssignGpus(const Fleet& fleet, const PodSetSpec& set,
                                     const Fills& fills, CapacityBasis basis) {
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

// The models to try for `set`: `model`, or (when mixing is allowed) the
// set's own preference list.
std::vector<const std::string*> SetModels(const PodSetSpec& set,
                                          const std::string* model) {
  std::vector<const std::string*> models = {model};
  if (model == nullptr && !set.gpu_models.empty()) {
    models.clear();
    for (const std::string& m : set.gpu_models) models.push_back(&m);
  }
  return models;
}

// Places one pod set (inside `domain`, or anywhere when -1); its pods, or
// nullopt with `reason` set.
std::optional<std::vector<PodPlacement>> PlaceSet(
    const PodSetSpec& set, int domain, Fleet& fleet, const std::string* model,
    const PlacementOptions& options, std::string& reason) {
  for (const std::string* m : SetModels(set, model)) {
    std::string why;
    PodSetPlacer placer(fleet, set, m, options);
    std::optional<Fills> fills =
        domain < 0 ? placer.Place(why) : placer.PlaceIn(domain, why);
    if (fills) return AssignGpus(fleet, set, *fills, options.basis);
    if (reason.empty()) reason = why;
  }
  return std::nullopt;
}

// Places the pod sets of one group (all constrained alike) and holds them
// under `probe`. Domains at their level where each set fits on its own are
// tried tightest first; the first where all fit together wins. PREFERRED
// walks up a level at a time. Returns "" or why not.
class GroupPlacer {
 public:
  GroupPlacer(const GangSpec& spec, const std::string& group, Fleet& fleet,
              const std::string* model, const PlacementOptions& options,
              Gang& probe, std::vector<std::vector<PodPlacement>>& per_set)
      : spec_(spec),
        fleet_(fleet),
        model_(model),
        options_(options),
        probe_(probe),
        per_set_(per_set) {
    for (size_t i = 0; i < spec.pod_sets.size(); ++i) {
      if (spec.pod_sets[i].group == group) members_.push_back(i);
    }
  }

  std::string Place() {
    const TopologyConstraint& topo = spec_.pod_sets[members_[0]].topology;
    for (int level = fleet_.LevelIndex(topo.level); level >= -1; --level) {
      for (int domain : Candidates(level)) {
        if (PlaceAllIn(domain)) return "";
      }
      if (topo.mode == TopologyMode::kRequired) break;
    }
    return absl::StrCat(
        "NO_FIT: group ", spec_.pod_sets[members_[0]].group, ": no ",
        topo.mode == TopologyMode::kRequired ? topo.level : "domain",
        " fits all of its pod sets together");
  }

 private:
  // Domains at `level` (-1 = the fleet) where every member fits on its
  // own, by the capacity they leave behind, least first.
  std::vector<int> Candidates(int level) const {
    const std::vector<int> domains =
        level < 0 ? std::vector<int>{0} : fleet_.DomainsAtLevel(level);
    std::vector<std::pair<int64_t, int>> fits;
    std::vector<int64_t> left(domains.size(), 0);
    std::vector<char> fit(domains.size(), 1);
    for (size_t m : members_) {
      PodSetPlacer placer(fleet_, spec_.pod_sets[m], model_, options_);
      for (size_t d = 0; d < domains.size(); ++d) {
        const int64_t leftover = placer.Leftover(domains[d]);
        fit[d] &= leftover >= 0;
        left[d] += leftover;
      }
    }
    for (size_t d = 0; d < domains.size(); ++d) {
      if (fit[d]) fits.emplace_back(left[d], domains[d]);
    }
    std::sort(fits.begin(), fits.end());
    std::vector<int> order;
    for (const auto& [leftover, domain] : fits) order.push_back(domain);
    return order;
  }

  bool PlaceAllIn(int domain) {
    std::vector<size_t> placed;
    for (size_t m : members_) {
      std::string why;
      auto pods =
          PlaceSet(spec_.pod_sets[m], domain, fleet_, model_, options_, why);
      if (!pods) {
        for (size_t p : placed) Unhold(p);
        return false;
      }
      per_set_[m] = *std::move(pods);
      if (options_.basis == CapacityBasis::kFree) {
        PHALANX_CHECK(fleet_.Allocate(probe_, per_set_[m]).ok());
      }
      placed.push_back(m);
    }
    return true;
  }

  void Unhold(size_t member) {
    if (options_.basis == CapacityBasis::kFree) {
      fleet_.Release(probe_, per_set_[member]);
    }
    per_set_[member].clear();
  }

  const GangSpec& spec_;
  Fleet& fleet_;
  const std::string* model_;
  const PlacementOptions& options_;
  Gang& probe_;
  std::vector<std::vector<PodPlacement>>& per_set_;
  std::vector<size_t> members_;
};

// Places every pod set with `model` (and, when mixing is allowed, each pod
// set's own preference list); a group's pod sets together, where the first
// of them stands. Allocates tentatively under `probe`.
PlacementResult PlaceWithModel(const GangSpec& spec, Fleet& fleet,
                               const std::string* model,
                               const PlacementOptions& options, Gang& probe) {
  std::vector<std::vector<PodPlacement>> per_set(spec.pod_sets.size());
  std::set<std::string> groups_placed;
  PlacementResult result;
  for (size_t i = 0; i < spec.pod_sets.size() && result.reason.empty(); ++i) {
    const PodSetSpec& set = spec.pod_sets[i];
    if (!set.group.empty() &&
        set.topology.mode != TopologyMode::kUnconstrained) {
      if (groups_placed.insert(set.group).second) {
        result.reason =
            GroupPlacer(spec, set.group, fleet, model, options, probe, per_set)
                .Place();
      }
      continue;
    }
    std::string reason;
    auto pods = PlaceSet(set, -1, fleet, model, options, reason);
    if (!pods) {
      result.reason = spec.pod_sets.size() > 1
                          ? absl::StrCat("pod set ", set.name, ": ", reason)
                          : reason;
      break;
    }
    per_set[i] = *std::move(pods);
    if (options.basis == CapacityBasis::kFree) {
      PHALANX_CHECK(fleet.Allocate(probe, per_set[i]).ok());
    }
  }
  for (std::vector<PodPlacement>& pods : per_set) {
    result.pods.insert(result.pods.end(), pods.begin(), pods.end());
  }
  if (options.basis == CapacityBasis::kFree) fleet.Release(probe, result.pods);
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

std::string PlacementShapeKey(const GangSpec& spec) {
  // Strings are length-prefixed, so no name can forge a separator.
  auto append = [](std::string& key, absl::string_view text) {
    absl::StrAppend(&key, text.size(), ":", text, ",");
  };
  std::string key = spec.allow_mixed_models ? "mixed" : "single";
  for (const PodSetSpec& set : spec.pod_sets) {
    absl::StrAppend(&key, "|", set.count, "x", set.gpus, ",", set.cpu_millis,
                    ",", set.memory_bytes, ",",
                    static_cast<int>(set.topology.mode), ",", set.slice.size,
                    ",");
    append(key, set.topology.level);
    append(key, set.slice.level);
    append(key, set.group);
    for (const std::string& model : set.gpu_models) append(key, model);
  }
  return key;
}

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
