#include "core/placement_order.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace phalanx::core {

void AppendPodSetShape(std::string& key, const PodSetSpec& set) {
  auto append = [&key](absl::string_view text) {
    absl::StrAppend(&key, text.size(), ":", text, ",");
  };
  absl::StrAppend(&key, "|", set.count, "x", set.gpus, ",", set.cpu_millis, ",",
                  set.memory_bytes, ",", static_cast<int>(set.topology.mode),
                  ",", set.slice.size, ",");
  append(set.topology.level);
  append(set.slice.level);
  append(set.group);
  for (const std::string& model : set.gpu_models) append(model);
  if (set.min_count != 0) absl::StrAppend(&key, "min", set.min_count, ",");
}

std::vector<size_t> MostConstrainedFirst(const GangSpec& spec,
                                         const Fleet& fleet) {
  struct Key {
    std::tuple<int, int, int, int, int64_t, int64_t, int64_t> hardness;
    std::string shape;
    size_t index;
  };
  std::vector<Key> keys;
  for (size_t i = 0; i < spec.pod_sets.size(); ++i) {
    const PodSetSpec& set = spec.pod_sets[i];
    const TopologyMode mode = set.topology.mode;
    const int strictness = mode == TopologyMode::kRequired    ? 2
                           : mode == TopologyMode::kPreferred ? 1
                                                              : 0;
    const int level = mode == TopologyMode::kUnconstrained
                          ? -1
                          : fleet.LevelIndex(set.topology.level);
    Key key{
        {-set.gpus, -set.slice.size, -strictness, -level,
         -int64_t{set.count} * set.gpus, -set.cpu_millis, -set.memory_bytes},
        "",
        i};
    AppendPodSetShape(key.shape, set);
    keys.push_back(std::move(key));
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return std::tie(a.hardness, a.shape, a.index) <
           std::tie(b.hardness, b.shape, b.index);
  });
  std::vector<size_t> order;
  for (const Key& key : keys) order.push_back(key.index);
  return order;
}

OrderSearch::OrderSearch(std::vector<size_t> first) : first_(std::move(first)) {
  positions_.resize(first_.size());
  for (size_t i = 0; i < positions_.size(); ++i) positions_[i] = i;
}

bool OrderSearch::Next(std::vector<size_t>& order) {
  const size_t sets = first_.size();
  if (tried_ >= kMaxOrders) return false;
  order.clear();
  if (sets <= kExhaustiveSets) {
    if (!std::next_permutation(positions_.begin(), positions_.end())) {
      return false;
    }
    for (size_t p : positions_) order.push_back(first_[p]);
  } else {
    if (++front_ >= sets) return false;
    order.push_back(first_[front_]);
    for (size_t i = 0; i < sets; ++i) {
      if (i != front_) order.push_back(first_[i]);
    }
  }
  ++tried_;
  return true;
}

}  // namespace phalanx::core
