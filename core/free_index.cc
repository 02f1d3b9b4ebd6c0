#include "core/free_index.h"

#include <algorithm>
#include <utility>

#include "core/check.h"

namespace phalanx::core {
namespace {
constexpr double kInfinity = std::numeric_limits<double>::infinity();
}  // namespace

void FreeIndex::Reset(std::vector<int> leaf_domain, std::vector<int> parent,
                      int models, int max_gpus) {
  models_ = models;
  max_gpus_ = max_gpus;
  leaf_domain_ = std::move(leaf_domain);
  parent_ = std::move(parent);
  slots_.assign(leaf_domain_.size(), SlotFree{});
  histogram_.assign(HistogramIndex(static_cast<int>(parent_.size()), 0, 0), 0);
  buckets_.assign(static_cast<size_t>(models_ + 1) * (max_gpus_ + 1), {});
  cpu_.Reset(static_cast<int>(slots_.size()));
  memory_.Reset(static_cast<int>(slots_.size()));
}

void FreeIndex::Set(int slot, const SlotFree& free) {
  SlotFree& current = slots_[slot];
  if (current == free) return;
  if (current.model >= 0) Count(slot, current, -1);
  if (free.model >= 0) {
    PHALANX_CHECK(free.model < models_ && free.free_gpus > 0 &&
                  free.free_gpus <= max_gpus_);
    Count(slot, free, +1);
  }
  if (current.cpu_per_gpu != free.cpu_per_gpu) cpu_.Set(slot, free.cpu_per_gpu);
  if (current.memory_per_gpu != free.memory_per_gpu) {
    memory_.Set(slot, free.memory_per_gpu);
  }
  current = free;
}

// Adds (sign +1) or removes (-1) the slot from its domains' histograms and
// its buckets, for its own model and for "any model".
void FreeIndex::Count(int slot, const SlotFree& free, int sign) {
  for (int model : {free.model, models_}) {
    for (int d = leaf_domain_[slot]; d >= 0; d = parent_[d]) {
      histogram_[HistogramIndex(d, model, free.free_gpus)] += sign;
    }
    absl::btree_set<int>& bucket =
        buckets_[model * (max_gpus_ + 1) + free.free_gpus];
    if (sign > 0) {
      bucket.insert(slot);
    } else {
      bucket.erase(slot);
    }
  }
}

void FreeIndex::MinTree::Reset(int size) {
  size_ = size;
  nodes_.assign(2 * static_cast<size_t>(size), kInfinity);
}

void FreeIndex::MinTree::Set(int index, double value) {
  int i = index + size_;
  nodes_[i] = value;
  for (i /= 2; i >= 1; i /= 2) {
    nodes_[i] = std::min(nodes_[2 * i], nodes_[2 * i + 1]);
  }
}

double FreeIndex::MinTree::Min(int begin, int end) const {
  double least = kInfinity;
  for (int lo = begin + size_, hi = end + size_; lo < hi; lo /= 2, hi /= 2) {
    if (lo & 1) least = std::min(least, nodes_[lo++]);
    if (hi & 1) least = std::min(least, nodes_[--hi]);
  }
  return least;
}

}  // namespace phalanx::core
