// FreeIndex: what is free on the READY nodes of a Fleet, kept current as GPUs
// are allocated and released, so placement can size a domain without visiting
// its nodes (docs/design.md §4 speed rules: incremental per-shape domain
// capacities).
//
// It keeps, for every domain and GPU model, how many READY nodes have each
// count of free GPUs (a pod set of g GPUs per pod fits floor(k / g) pods on a
// node with k free, so one histogram answers every shape); per model, the
// READY nodes with free GPUs grouped by how many, in fleet order (least-free
// packing and the tightest node without a sort); and over the slots the least
// free CPU and memory per free GPU (where those could limit a pod set before
// its GPUs do, the histogram is not enough and the caller counts nodes).
// Owned and updated by Fleet; not thread-safe.
#ifndef PHALANX_CORE_FREE_INDEX_H_
#define PHALANX_CORE_FREE_INDEX_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/btree_set.h"

namespace phalanx::core {

class FreeIndex {
 public:
  // What one slot offers. A slot that is not READY, or has no free GPU, is
  // not indexed (model = -1).
  struct SlotFree {
    int model = -1;     // index into the fleet's sorted GPU models
    int free_gpus = 0;  // 1..max_gpus when indexed
    // Free CPU millis and memory bytes per free GPU (infinity when the node
    // does not declare them, or when the slot is not indexed).
    double cpu_per_gpu = std::numeric_limits<double>::infinity();
    double memory_per_gpu = std::numeric_limits<double>::infinity();

    bool operator==(const SlotFree&) const = default;
  };

  // Forgets everything: `slots` slots, none indexed. `leaf_domain[s]` is the
  // lowest domain holding slot s and `parent[d]` the parent of domain d (-1
  // for the root); `models` GPU models; nodes have at most `max_gpus` GPUs.
  void Reset(std::vector<int> leaf_domain, std::vector<int> parent, int models,
             int max_gpus);
  // Records what slot `slot` offers now.
  void Set(int slot, const SlotFree& free);

  // The model index meaning "any model".
  int any_model() const { return models_; }
  int max_gpus() const { return max_gpus_; }
  // READY nodes of `model` (or any_model()) in `domain` with `free` free GPUs.
  int64_t Nodes(int domain, int model, int free) const {
    return histogram_[HistogramIndex(domain, model, free)];
  }
  // Slots of READY nodes of `model` (or any_model()) with `free` free GPUs,
  // in fleet order.
  const absl::btree_set<int>& SlotsWithFree(int model, int free) const {
    return buckets_[model * (max_gpus_ + 1) + free];
  }
  // The least free CPU millis (memory bytes) per free GPU over the indexed
  // slots in [begin, end); infinity when none.
  double MinCpuPerGpu(int begin, int end) const { return cpu_.Min(begin, end); }
  double MinMemoryPerGpu(int begin, int end) const {
    return memory_.Min(begin, end);
  }
  // The lowest domain holding `slot`, and the parent of `domain` (-1 = none).
  int LeafDomain(int slot) const { return leaf_domain_[slot]; }
  int Parent(int domain) const { return parent_[domain]; }

 private:
  // Minimum over ranges of slots, with point updates.
  class MinTree {
   public:
    void Reset(int size);
    void Set(int index, double value);
    double Min(int begin, int end) const;

   private:
    int size_ = 0;
    std::vector<double> nodes_;  // size_ leaves at [size_, 2 * size_)
  };

  size_t HistogramIndex(int domain, int model, int free) const {
    return (static_cast<size_t>(domain) * (models_ + 1) + model) *
               (max_gpus_ + 1) +
           free;
  }
  void Count(int slot, const SlotFree& free, int sign);

  int models_ = 0;
  int max_gpus_ = 0;
  std::vector<int> leaf_domain_;
  std::vector<int> parent_;
  std::vector<SlotFree> slots_;
  std::vector<int32_t> histogram_;
  std::vector<absl::btree_set<int>> buckets_;
  MinTree cpu_;
  MinTree memory_;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_FREE_INDEX_H_
