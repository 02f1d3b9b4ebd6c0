#include "core/placement.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/placement_filters.h"
#include "core/placement_order.h"
#include "core/placement_scorers.h"

namespace phalanx::core {
namespace {

using Fills = std::vector<std::pair<int, int>>;  // (slot, pods) in fill order

// Domains at `level` (-1: the root) a placement inside domain `within` may
// use: every domain of the level when `within` is the root; else those
// inside it, and `within` itself for its own level and every level above
// (inside it, a constraint at a wider level is met). `scratch` holds the
// answer when it is not the fleet's own list.
const std::vector<int>& UsableDomains(const Fleet& fleet, int level, int within,
                                      std::vector<int>& scratch) {
  static const std::vector<int> kRoot = {0};
  if (within == 0) return level < 0 ? kRoot : fleet.DomainsAtLevel(level);
  const Fleet::Domain& w = fleet.domains()[within];
  scratch.clear();
  if (level <= w.level) {
    scratch.push_back(within);
    return scratch;
  }
  for (int d : fleet.DomainsAtLevel(level)) {
    const Fleet::Domain& domain = fleet.domains()[d];
    if (domain.node_begin >= w.node_begin && domain.node_end <= w.node_end) {
      scratch.push_back(d);
    }
  }
  return scratch;
}

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
        node_rank_(options.node_rank ? &options.node_rank : nullptr),
        slice_level_(set.slice.size > 0 ? fleet.LevelIndex(set.slice.level)
                                        : -1),
        within_(options.within_domain),
        slot_begin_(fleet.domains()[within_].node_begin),
        slot_end_(fleet.domains()[within_].node_end),
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
  //
  // The pipeline for one pod set, and why each stage stands where it does:
  //  1. Filters (placement_filters.h: gpu_model, node_state, resources),
  //     chained in PodsOnNode, cheapest first. They run before anything is
  //     ranked, once per node (CountEveryNode) or folded into the free
  //     index's histograms (PrepareIndexed), so a ranking stage only ever
  //     sees counts of pods that truly fit; the node filter of the options
  //     (reservations, holds) is applied with them.
  //  2. The domain (BestFitDomain, placement_scorers.h) at the
  //     constraint's level: it needs only per-domain counts, so it runs
  //     before any node is visited, and a miss names the level in the
  //     reason. Slices are sized the same way, in whole slices.
  //  3. The spread inside the chosen domain (Distribute: tightest
  //     remainder, largest first, ties to the fewest free GPUs), recursing
  //     child domain by child domain down to the nodes: last, because it
  //     visits only the chosen domain's nodes. PREFERRED once it walked up
  //     uses FewestNodes instead, as the constraint is already missed and
  //     the node count is what is left to keep small.
  // Across pod sets, PlaceGang adds the model choice (and the quota gate,
  // before a model is tried: a refused model costs no placement), the
  // order search (placement_order.h) and groups sharing one domain.
  std::optional<Fills> Place(std::string& reason) {
    const TopologyConstraint& topo = set_.topology;
    if (Sliced()) return PlaceSlices(reason);
    if (topo.mode == TopologyMode::kUnconstrained) return PackLeastFree(reason);
    const int level = fleet_.LevelIndex(topo.level);
    PHALANX_CHECK(level >= 0);
    if (topo.mode == TopologyMode::kRequired) return Required(level, reason);
    // Once it walked up, the constraint is already missed: use the fewest
    // nodes (and so domains) it can.
    for (int l = level; l >= 0; --l) {
      std::string ignored;
      if (auto fill = Required(l, ignored, /*fewest_nodes=*/l != level)) {
        return fill;
      }
    }
    const int64_t fleet_pods = DomainPods(within_);
    if (fleet_pods >= set_.count) {
      fills_.clear();
      FillFewestNodes(within_, set_.count);
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
    free_prefix_.assign(slots.size() + 1, 0);
    const int model = model_ == nullptr ? -1 : fleet_.ModelIndex(*model_);
    for (size_t i = 0; i < slots.size(); ++i) {
      const bool allowed = static_cast<int>(i) >= slot_begin_ &&
                           static_cast<int>(i) < slot_end_ &&
                           (!options.node_allowed || options.node_allowed(i));
      node_pods_[i] =
          allowed
              ? PodsOnNode(PodRequest{set_, model_, basis_, model}, slots[i])
              : 0;
      prefix_[i + 1] = prefix_[i] + node_pods_[i];
      free_prefix_[i + 1] =
          free_prefix_[i] +
          (node_pods_[i] > 0 ? FreeGpus(static_cast<int>(i)) : 0);
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
      excluded_pods_.resize(fleet_.domains().size());
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
    if (model_ != nullptr && s.model != model_index_) return 0;
    return std::min<int64_t>(set_.count, s.FreeGpus() / set_.gpus);
  }

  // Pods the index counts in `domain` on nodes the filter refuses.
  int64_t ExcludedPods(int domain) const {
    return excluded_pods_.empty() ? 0 : excluded_pods_[domain];
  }

  bool Excluded(int slot) const {
    return std::binary_search(excluded_.begin(), excluded_.end(), slot);
  }

  // Pods of the set that fit on the node at `slot`.
  int64_t NodePods(int slot) const {
    if (!indexed_) return node_pods_[slot];
    if (model_index_ < 0 || slot < slot_begin_ || slot >= slot_end_ ||
        Excluded(slot)) {
      return 0;
    }
    return PodsOnNode(
        PodRequest{set_, model_, basis_, model_ == nullptr ? -1 : model_index_},
        fleet_.slots()[slot]);
  }

  // Pods of the set that fit in `domain`.
  int64_t DomainPods(int domain) const {
    const Fleet::Domain& d = fleet_.domains()[domain];
    if (!indexed_) return prefix_[d.node_end] - prefix_[d.node_begin];
    if (model_index_ < 0) return 0;
    if (!gpus_bind_everywhere_ && !GpusBind(d.node_begin, d.node_end)) {
      int64_t pods = 0;
      ForEachNodeThatMayFit(domain, [&](int i) { pods += NodePods(i); });
      return pods;
    }
    int64_t pods = 0;
    for (int free = set_.gpus; free <= index_.max_gpus(); ++free) {
      pods += index_.Nodes(domain, model_index_, free) *
              std::min<int64_t>(set_.count, free / set_.gpus);
    }
    pods -= ExcludedPods(domain);
    return pods;
  }

  // Free GPUs of `slot` on the placement's basis.
  int FreeGpus(int slot) const {
    const Fleet::Slot& s = fleet_.slots()[slot];
    return basis_ == CapacityBasis::kTotal ? s.node.spec.gpu_count
                                           : s.FreeGpus();
  }

  // On every resource of the fleet, what keeps each node from holding a
  // single pod of the set: "the largest node has 8 GPUs; a pod needs 16".
  std::string NodeShortfall() const {
    int64_t gpus = 0;
    int64_t cpu = 0;
    int64_t memory = 0;
    bool any = false;
    bool cpu_untracked = false;
    bool memory_untracked = false;
    for (const Fleet::Slot& slot : fleet_.slots()) {
      const NodeSpec& node = slot.node.spec;
      if (model_ != nullptr && node.gpu_model != *model_) continue;
      any = true;
      gpus = std::max<int64_t>(gpus, node.gpu_count);
      cpu = std::max(cpu, node.cpu_millis);
      memory = std::max(memory, node.memory_bytes);
      cpu_untracked |= node.cpu_millis == 0;
      memory_untracked |= node.memory_bytes == 0;
    }
    if (!any) return absl::StrCat("no node has GPU model ", *model_);
    if (gpus < set_.gpus) {
      return absl::StrCat("the largest node has ", gpus, " GPUs; a pod needs ",
                          set_.gpus);
    }
    if (!cpu_untracked && cpu < set_.cpu_millis) {
      return absl::StrCat("the largest node has ", cpu,
                          " CPU millis; a pod needs ", set_.cpu_millis);
    }
    if (!memory_untracked && memory < set_.memory_bytes) {
      return absl::StrCat("the largest node has ", memory,
                          " bytes of memory; a pod needs ", set_.memory_bytes);
    }
    return absl::StrCat("no node has ", set_.gpus, " GPUs, ", set_.cpu_millis,
                        " CPU millis and ", set_.memory_bytes,
                        " bytes of memory together, as a pod needs");
  }

  std::string ShortBy(absl::string_view where, int64_t best) const {
    if (basis_ == CapacityBasis::kTotal && best == 0) {
      return absl::StrCat("can never fit: ", NodeShortfall());
    }
    if (basis_ == CapacityBasis::kTotal) {
      return absl::StrCat("can never fit: the largest ", where, " holds ", best,
                          " of ", set_.count, " pods of ", set_.gpus, " GPUs");
    }
    return absl::StrCat("NO_FIT at level ", where, ": largest free ", where,
                        " fits ", best, " of ", set_.count, " pods");
  }

  // Every pod inside one domain at `level` (levels().size() = one node).
  // With `fewest_nodes`, the domain's pods go on the fewest nodes.
  std::optional<Fills> Required(int level, std::string& reason,
                                bool fewest_nodes = false) {
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
    const int best = BestFitDomain(
        UsableDomains(fleet_, level, within_, scratch_), set_.count,
        [this](int domain) { return DomainPods(domain); }, first_fit_, largest);
    if (best < 0) {
      reason = ShortBy(fleet_.levels()[level], largest);
      return std::nullopt;
    }
    if (fewest_nodes) {
      FillFewestNodes(best, set_.count);
    } else {
      Fill(best, set_.count);
    }
    return fills_;
  }

  // The indexed slots with `free` free GPUs of the model, from the first
  // slot of the domain placement stays inside on (in fleet order).
  struct SlotRange {
    absl::btree_set<int>::const_iterator b, e;
    absl::btree_set<int>::const_iterator begin() const { return b; }
    absl::btree_set<int>::const_iterator end() const { return e; }
  };
  SlotRange SlotsWithFree(int64_t free) const {
    const absl::btree_set<int>& slots =
        index_.SlotsWithFree(model_index_, static_cast<int>(free));
    return {slot_begin_ == 0 ? slots.begin() : slots.lower_bound(slot_begin_),
            slots.end()};
  }

  // The node that fits `need` pods with the fewest free GPUs (ties: fleet
  // order; first fit: the first node that fits), or -1.
  int TightestNode(int64_t need) const {
    if (indexed_ && !first_fit_) {
      if (model_index_ < 0) return -1;
      const int64_t lowest = std::min<int64_t>(need * set_.gpus, kNoGpuLimit);
      for (int64_t free = lowest; free <= index_.max_gpus(); ++free) {
        for (int slot : SlotsWithFree(free)) {
          if (slot >= slot_end_) break;
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
      for (int slot : SlotsWithFree(free)) {
        if (slot >= slot_end_) break;
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
    std::vector<int64_t> free;
    if (d.child_domains.empty()) {
      for (int i = d.node_begin; i < d.node_end; ++i) {
        left.push_back(NodePods(i));
        free.push_back(FreeGpus(i));
      }
      for (const auto& [i, pods] : Distribute(left, free, count, first_fit_)) {
        fills_.emplace_back(d.node_begin + i, static_cast<int>(pods));
      }
      return;
    }
    for (int child : d.child_domains) {
      left.push_back(DomainPods(child));
      free.push_back(DomainFreeGpus(child));
    }
    for (const auto& [i, pods] : Distribute(left, free, count, first_fit_)) {
      Fill(d.child_domains[i], pods);
    }
  }

  // Free GPUs on the nodes of `domain` that could take a pod of the set
  // (a tie-break only: the node filter is not applied).
  int64_t DomainFreeGpus(int domain) const {
    const Fleet::Domain& d = fleet_.domains()[domain];
    if (!indexed_) return free_prefix_[d.node_end] - free_prefix_[d.node_begin];
    if (model_index_ < 0) return 0;
    // Counted as the nodes' own pods are (DomainPods): from the histogram
    // where GPUs alone decide and no node is filtered out, else per node.
    int64_t free = 0;
    if ((!gpus_bind_everywhere_ && !GpusBind(d.node_begin, d.node_end)) ||
        ExcludedPods(domain) > 0) {
      ForEachNodeThatMayFit(domain, [&](int i) {
        if (NodePods(i) > 0) free += FreeGpus(i);
      });
      return free;
    }
    for (int gpus = set_.gpus; gpus <= index_.max_gpus(); ++gpus) {
      free += gpus * index_.Nodes(domain, model_index_, gpus);
    }
    return free;
  }

  // Puts `count` pods into `domain` on the fewest nodes (the fewest_nodes
  // stage, placement_scorers.h). Costs a sort of the domain's nodes.
  // Calls `visit(slot)` for every slot of `domain` that may hold a pod of
  // the set, among others. Indexed, those are the READY nodes of the model
  // with a pod's GPUs free, read from the free index's buckets (a nearly
  // full fleet has few); otherwise every slot of the domain.
  template <typename Visit>
  void ForEachNodeThatMayFit(int domain, Visit visit) const {
    const Fleet::Domain& d = fleet_.domains()[domain];
    if (!indexed_) {
      for (int i = d.node_begin; i < d.node_end; ++i) visit(i);
      return;
    }
    if (model_index_ < 0) return;
    for (int free = set_.gpus; free <= index_.max_gpus(); ++free) {
      const absl::btree_set<int>& slots =
          index_.SlotsWithFree(model_index_, free);
      for (auto it = slots.lower_bound(d.node_begin);
           it != slots.end() && *it < d.node_end; ++it) {
        visit(*it);
      }
    }
  }

  void FillFewestNodes(int domain, int64_t count) {
    if (first_fit_) {
      Fill(domain, count);
      return;
    }
    std::map<int, int64_t> leaf_pods;
    std::vector<FewestNodesCandidate> nodes;
    ForEachNodeThatMayFit(domain, [&](int i) {
      const int64_t pods = NodePods(i);
      if (pods <= 0) return;
      const int leaf = index_.LeafDomain(i);
      auto [it, added] = leaf_pods.try_emplace(leaf, 0);
      if (added) it->second = DomainPods(leaf);
      nodes.push_back({pods, it->second, FreeGpus(i), i, leaf});
    });
    // FewestNodes orders candidates totally: the order met does not count.
    for (const auto& [slot, pods] : FewestNodes(std::move(nodes), count)) {
      fills_.emplace_back(slot, static_cast<int>(pods));
    }
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
          UsableDomains(fleet_, level, within_, scratch_);
      const int best = BestFitDomain(
          domains, need, [this](int domain) { return DomainSlices(domain); },
          first_fit_, largest);
      if (best >= 0) {
        fills_.clear();
        FillSlices(best, need);
        return fills_;
      }
      if (topo.mode == TopologyMode::kRequired) break;
    }
    const std::string where =
        topo.mode == TopologyMode::kRequired ? topo.level : "fleet";
    if (basis_ == CapacityBasis::kTotal && DomainPods(within_) == 0) {
      reason = absl::StrCat("can never fit: ", NodeShortfall());
      return std::nullopt;
    }
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
    std::vector<int64_t> free;
    if (d.child_domains.empty()) {
      for (int i = d.node_begin; i < d.node_end; ++i) {
        left.push_back(NodePods(i) / size);
        free.push_back(FreeGpus(i));
      }
      for (const auto& [i, count] :
           Distribute(left, free, slices, first_fit_)) {
        fills_.emplace_back(d.node_begin + i, static_cast<int>(count * size));
      }
      return;
    }
    for (int child : d.child_domains) {
      left.push_back(DomainSlices(child));
      free.push_back(DomainFreeGpus(child));
    }
    for (const auto& [i, count] : Distribute(left, free, slices, first_fit_)) {
      FillSlices(d.child_domains[i], count);
    }
  }

  // UNCONSTRAINED: fill the least-free nodes first (pack into fragments).
  std::optional<Fills> PackLeastFree(std::string& reason) {
    const int64_t fleet_pods = DomainPods(within_);
    if (fleet_pods < set_.count) {
      reason = basis_ == CapacityBasis::kTotal && fleet_pods == 0
                   ? absl::StrCat("can never fit: ", NodeShortfall())
               : basis_ == CapacityBasis::kTotal
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
    if (node_rank_ && !first_fit_) {  // scorers (core/node_score.h)
      std::vector<std::pair<NodeRank, int>> ranked;
      for (int i = slot_begin_; i < slot_end_; ++i) {
        const int64_t pods = std::min(count, NodePods(i));
        if (pods > 0)
          ranked.emplace_back((*node_rank_)(i, pods * set_.gpus), i);
      }
      std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
        return a.first < b.first ||
               (!(b.first < a.first) && a.second < b.second);
      });
      for (const auto& [rank, slot] : ranked) {
        if (take(slot)) return fills_;
      }
      PHALANX_CHECK(false);  // DomainPods(within_) promised enough
    }
    if (indexed_ && !first_fit_) {
      for (int free = set_.gpus; free <= index_.max_gpus(); ++free) {
        for (int slot : SlotsWithFree(free)) {
          if (slot >= slot_end_) break;
          if (take(slot)) return fills_;
        }
      }
      PHALANX_CHECK(false);  // DomainPods(within_) promised enough
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

  // Bounds the free-GPU walk (no node has more GPUs than this).
  static constexpr int64_t kNoGpuLimit = 1 << 20;

  const Fleet& fleet_;
  const FreeIndex& index_;
  const PodSetSpec& set_;
  const std::string* model_;
  const CapacityBasis basis_;
  const bool first_fit_;
  const std::function<NodeRank(int, int)>* node_rank_;
  const int slice_level_;  // -1 when the set is not sliced
  const int within_;       // the domain placement stays inside
  const int slot_begin_;   // its slots: [slot_begin_, slot_end_)
  const int slot_end_;
  std::vector<int> scratch_;  // for UsableDomains
  const bool indexed_;
  // Counted up front (not indexed).
  std::vector<int64_t> node_pods_;
  std::vector<int64_t> prefix_;
  std::vector<int64_t> free_prefix_;  // free GPUs of nodes with pods > 0
  // Indexed.
  int model_index_ = -1;
  double cpu_per_gpu_ = 0;
  double memory_per_gpu_ = 0;
  bool gpus_bind_everywhere_ = false;
  std::vector<int> excluded_;  // sorted slots the node filter refuses
  // By domain; empty when no excluded node could hold a pod.
  std::vector<int64_t> excluded_pods_;
  Fills fills_;
};

// Turns pods-per-slot into pod placements with the lowest free GPU indices.
std::vector<PodPlacement> AssignGpus(const Fleet& fleet, const PodSetSpec& set,
                                     const Fills& fills, CapacityBasis basis) {
  std::vector<PodPlacement> pods;
  int index = 0;
  for (const auto& [slot_index, count] : fills) {
    const Fleet::Slot& slot = fleet.slots()[slot_index];
    uint64_t used = basis == CapacityBasis::kTotal ? 0 : slot.TakenGpuMask();
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
    if (AcceptsModel(spec, model)) choices.push_back(&model);
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
  // Members are placed in the order they stand in `order`.
  GroupPlacer(const GangSpec& spec, const std::string& group,
              const std::vector<size_t>& order, Fleet& fleet,
              const std::string* model, const PlacementOptions& options,
              Gang& probe, std::vector<std::vector<PodPlacement>>& per_set)
      : spec_(spec),
        fleet_(fleet),
        model_(model),
        options_(options),
        probe_(probe),
        per_set_(per_set) {
    for (size_t i : order) {
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
    std::vector<int> scratch;
    const std::vector<int>& domains =
        UsableDomains(fleet_, level, options_.within_domain, scratch);
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
        PHALANX_CHECK(fleet_.Allocate(probe_, kNoGang, per_set_[m]).ok());
      }
      placed.push_back(m);
    }
    return true;
  }

  void Unhold(size_t member) {
    if (options_.basis == CapacityBasis::kFree) {
      fleet_.Release(probe_, kNoGang, per_set_[member]);
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
// set's own preference list) one after another in `order` (indices into
// spec.pod_sets); a group's pod sets together, where the first of them
// stands in `order`. Allocates tentatively under `probe`; the pods of the
// result are in pod-set order.
PlacementResult PlaceInOrder(const GangSpec& spec, Fleet& fleet,
                             const std::string* model,
                             const PlacementOptions& options, Gang& probe,
                             const std::vector<size_t>& order) {
  const uint64_t version = fleet.version();
  std::vector<std::vector<PodPlacement>> per_set(spec.pod_sets.size());
  std::set<std::string> groups_placed;
  PlacementResult result;
  size_t unheld = per_set.size();  // the set placed but not held, if any
  for (size_t i : order) {
    if (!result.reason.empty()) break;
    const PodSetSpec& set = spec.pod_sets[i];
    if (!set.group.empty() &&
        set.topology.mode != TopologyMode::kUnconstrained) {
      if (groups_placed.insert(set.group).second) {
        result.reason = GroupPlacer(spec, set.group, order, fleet, model,
                                    options, probe, per_set)
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
    // The last set placed is held only if a later one must see it.
    if (i == order.back()) {
      unheld = i;
    } else if (options.basis == CapacityBasis::kFree) {
      PHALANX_CHECK(fleet.Allocate(probe, kNoGang, per_set[i]).ok());
    }
  }
  for (size_t i = 0; i < per_set.size(); ++i) {
    std::vector<PodPlacement>& pods = per_set[i];
    if (options.basis == CapacityBasis::kFree && i != unheld) {
      fleet.Release(probe, kNoGang, pods);
    }
    result.pods.insert(result.pods.end(), std::make_move_iterator(pods.begin()),
                       std::make_move_iterator(pods.end()));
  }
  fleet.RestoreVersion(version);  // every tentative hold is released
  result.placed = result.reason.empty();
  if (!result.placed) result.pods.clear();
  return result;
}

// Places the gang with `model` (and, when mixing is allowed, each pod set's
// own preference list), searching orders of its pod sets: one pod set
// placed first can take the only room another had, so no listed order is
// trusted. Most constrained first; when that fails and every set fits on
// its own, the other orders until one places the gang. A set that does not
// fit on its own fits in no order, and says why.
PlacementResult PlaceWithModel(const GangSpec& spec, Fleet& fleet,
                               const std::string* model,
                               const PlacementOptions& options, Gang& probe) {
  const size_t sets = spec.pod_sets.size();
  if (sets == 1) return PlaceInOrder(spec, fleet, model, options, probe, {0});
  const std::vector<size_t> canonical = MostConstrainedFirst(spec, fleet);
  PlacementResult first =
      PlaceInOrder(spec, fleet, model, options, probe, canonical);
  if (first.placed) return first;
  for (size_t i : canonical) {
    PlacementResult alone =
        PlaceInOrder(spec, fleet, model, options, probe, {i});
    if (!alone.placed) return alone;
  }
  OrderSearch search(canonical);
  for (std::vector<size_t> order; search.Next(order);) {
    if (PlacementResult r =
            PlaceInOrder(spec, fleet, model, options, probe, order);
        r.placed) {
      return r;
    }
  }
  return first;
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

// The code of a placement that found no room.
ReasonCode FitFailure(CapacityBasis basis) {
  return basis == CapacityBasis::kTotal ? ReasonCode::kNeverFits
                                        : ReasonCode::kNoFit;
}

}  // namespace

std::string PlacementShapeKey(const GangSpec& spec) {
  std::string key = spec.allow_mixed_models ? "mixed" : "single";
  for (const PodSetSpec& set : spec.pod_sets) AppendPodSetShape(key, set);
  return key;
}

bool AcceptsModel(const GangSpec& spec, const std::string& model) {
  return spec.allow_mixed_models ||
         std::all_of(spec.pod_sets.begin(), spec.pod_sets.end(),
                     [&](const PodSetSpec& set) {
                       return set.gpu_models.empty() ||
                              std::find(set.gpu_models.begin(),
                                        set.gpu_models.end(),
                                        model) != set.gpu_models.end();
                     });
}

PlacementResult PlaceGang(const GangSpec& spec, Fleet& fleet,
                          const PlacementOptions& options) {
  const CapacityBasis basis = options.basis;
  // Placement holds a pod set under `probe` only while another set is
  // placed after it (a group holds its members), so a gang of one
  // ungrouped pod set needs no copy of its spec.
  Gang probe;
  probe.id = GangId("\x01probe");
  if (spec.pod_sets.size() > 1 ||
      (!spec.pod_sets.empty() && !spec.pod_sets[0].group.empty())) {
    probe.spec = spec;
  }
  const std::vector<std::string>& fleet_models = fleet.Models();
  PlacementResult first_failure;
  for (const std::string* model : ModelChoices(spec, fleet_models)) {
    if (model != nullptr && options.model_gate) {
      std::string why = options.model_gate(*model, spec.TotalGpus());
      if (!why.empty()) {
        if (first_failure.reason.empty()) {
          first_failure.reason = why;
          first_failure.code = ReasonCode::kQuota;
        }
        continue;
      }
    }
    PlacementResult result = PlaceWithModel(spec, fleet, model, options, probe);
    if (result.placed && model == nullptr && options.model_gate) {
      result.reason = GateMixed(options.model_gate, fleet, result.pods);
      result.placed = result.reason.empty();
      if (!result.placed) {
        result.pods.clear();
        result.code = ReasonCode::kQuota;
      }
    }
    if (result.placed) return result;
    if (result.code == ReasonCode::kNone) result.code = FitFailure(basis);
    if (first_failure.reason.empty()) {
      first_failure = std::move(result);
      if (model != nullptr && fleet_models.size() > 1) {
        first_failure.reason = absl::StrCat(*model, ": ", first_failure.reason);
      }
    }
  }
  if (first_failure.reason.empty()) {
    first_failure.code = FitFailure(basis);
    first_failure.reason = basis == CapacityBasis::kTotal
                               ? "can never fit: no node has an acceptable "
                                 "GPU model"
                               : "NO_FIT: no node has an acceptable GPU model";
  }
  return first_failure;
}

}  // namespace phalanx::core
