// Fleet: the nodes in fleet order (by topology path, then id), what each has
// allocated, and the topology tree over them (docs/design.md §3). Every domain
// covers a contiguous range of nodes, so capacities are sums over ranges. Owned
// by the Scheduler; not thread-safe.
#ifndef PHALANX_CORE_FLEET_H_
#define PHALANX_CORE_FLEET_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/bits.h"
#include "core/free_index.h"
#include "core/model.h"

namespace phalanx::core {

class Fleet {
 public:
  // A gang with pods on a node: its handle and how many pods.
  struct GangPods {
    GangHandle gang;
    int pods = 0;
  };
  // One node and what is allocated on it.
  struct Slot {
    Node node;
    int model = -1;              // index of the node's GPU model in Models()
    uint64_t used_gpu_mask = 0;  // bit i = GPU i allocated
    int64_t used_cpu_millis = 0;
    int64_t used_memory_bytes = 0;
    // The gangs with pods here, in no particular order (a reader that
    // decides by their order sorts them by id first).
    std::vector<GangPods> gang_pods;

    // GPUs that may not be handed out: allocated or reported unhealthy.
    uint64_t TakenGpuMask() const {
      return used_gpu_mask | node.unhealthy_gpu_mask;
    }
    // GPUs neither allocated nor unhealthy.
    int FreeGpus() const {
      return node.spec.gpu_count - CountOnes(TakenGpuMask());
    }
    bool Idle() const { return used_gpu_mask == 0 && gang_pods.empty(); }
  };

  // A topology domain. The root (index 0, level -1) covers the whole fleet.
  struct Domain {
    std::string path;  // "b1/r07"; "" for the root
    int level = -1;    // index into levels(); -1 for the root
    int node_begin = 0;
    int node_end = 0;                // slots [node_begin, node_end)
    std::vector<int> child_domains;  // empty on the lowest level
  };

  explicit Fleet(std::vector<std::string> levels = {});

  // Topology levels, widest first (the node level is implicit).
  const std::vector<std::string>& levels() const { return levels_; }
  // Returns the index of `level` in levels(), levels().size() for "node",
  // or -1 when unknown.
  int LevelIndex(absl::string_view level) const;
  // Checks that every node labels every level in `levels`; then adopts them.
  absl::Status SetLevels(std::vector<std::string> levels);

  // Checks that `node` can be stored: labels for every level, and its GPUs,
  // CPU and memory still cover what is allocated on it.
  absl::Status CheckUpsert(const NodeSpec& spec) const;
  // Adds or replaces nodes (an existing node keeps its allocations). Call
  // CheckUpsert for each first.
  void Upsert(const std::vector<Node>& nodes);
  // Removes an idle node. Returns false when absent.
  bool Remove(const NodeId& id);

  // Returns the slot index of `id`, or -1.
  int Find(const NodeId& id) const;
  const std::vector<Slot>& slots() const { return slots_; }
  const std::vector<Domain>& domains() const { return domains_; }
  // Domains at `level` (0-based), in fleet order.
  const std::vector<int>& DomainsAtLevel(int level) const {
    return domains_by_level_[level];
  }
  // GPU models present, sorted.
  const std::vector<std::string>& Models() const { return models_; }
  // Index of `model` in Models(), or -1.
  int ModelIndex(absl::string_view model) const;
  // What is free on READY nodes, per domain (kept current by every change).
  const FreeIndex& free_index() const { return free_index_; }
  // Changes whenever nodes, their specs or states, or the levels change
  // (not when GPUs are allocated or released).
  uint64_t structure_version() const { return structure_version_; }
  // Changes whenever slots are added, removed or reordered, or a node's
  // spec changes — not when only a node's state does: while it holds, a
  // slot index names the same node with the same GPUs and model.
  uint64_t layout_version() const { return layout_version_; }
  // Changes with every change at all: nodes, levels, and every allocation
  // or release. A cache of what placement finds in this fleet may key on it.
  uint64_t version() const { return version_; }
  // For a caller that undid its own changes exactly (released gangs
  // allocated again with the same placements, or the reverse): the version
  // it saw before them, so caches keyed on it stay valid. Nothing else may
  // have changed in between.
  void RestoreVersion(uint64_t version) { version_ = version; }

  // Marks the pods of `gang`, whose handle is `handle` (no other gang on
  // the fleet has it), at `placement` allocated. Fails (and changes
  // nothing) when a node is unknown or a GPU is already held.
  absl::Status Allocate(const Gang& gang, GangHandle handle,
                        const std::vector<PodPlacement>& placement);
  // Frees what Allocate took for `gang` (handle `handle`) at `placement`.
  void Release(const Gang& gang, GangHandle handle,
               const std::vector<PodPlacement>& placement);

 private:
  // Adds `pods` (negative: removes) to `gang`'s pod count on `slot`.
  static void AddPods(Slot& slot, GangHandle gang, int pods);
  void Rebuild();
  // Returns whether the set of models changed.
  bool RefreshModels();
  void Reindex();
  void IndexSlot(int index);
  std::string PathOf(const Node& node, int depth) const;

  std::vector<std::string> levels_;
  std::vector<Slot> slots_;
  std::vector<std::string> models_;  // GPU models present, sorted
  absl::flat_hash_map<NodeId, int> index_;
  std::vector<Domain> domains_;
  std::vector<std::vector<int>> domains_by_level_;
  FreeIndex free_index_;
  uint64_t structure_version_ = 0;
  uint64_t layout_version_ = 0;
  uint64_t version_ = 0;
};

// Returns the pod set named `name` in `spec`, or nullptr.
const PodSetSpec* FindPodSet(const GangSpec& spec, absl::string_view name);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_FLEET_H_
