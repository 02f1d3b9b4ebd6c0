#include "core/fleet.h"

#include <algorithm>
#include <bit>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/check.h"

namespace phalanx::core {

Fleet::Fleet(std::vector<std::string> levels) : levels_(std::move(levels)) {
  Rebuild();
  Reindex();
}

int Fleet::LevelIndex(absl::string_view level) const {
  if (level == kNodeLevel) return static_cast<int>(levels_.size());
  for (size_t i = 0; i < levels_.size(); ++i) {
    if (levels_[i] == level) return static_cast<int>(i);
  }
  return -1;
}

absl::Status Fleet::SetLevels(std::vector<std::string> levels) {
  for (const Slot& slot : slots_) {
    for (const std::string& level : levels) {
      if (!slot.node.spec.labels.contains(level)) {
        return absl::FailedPreconditionError(
            absl::StrCat("node \"", slot.node.spec.id.value(),
                         "\" has no label for topology level \"", level, "\""));
      }
    }
  }
  levels_ = std::move(levels);
  Rebuild();
  Reindex();
  ++structure_version_;
  ++version_;
  return absl::OkStatus();
}

absl::Status Fleet::CheckUpsert(const NodeSpec& spec) const {
  for (const std::string& level : levels_) {
    if (!spec.labels.contains(level)) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels: missing topology level \"", level, "\""));
    }
  }
  int index = Find(spec.id);
  if (index < 0) return absl::OkStatus();
  const Slot& slot = slots_[index];
  int highest_used = 64 - std::countl_zero(slot.used_gpu_mask);
  if (spec.gpu_count < highest_used) {
    return absl::FailedPreconditionError(
        absl::StrCat("gpu_count: GPU ", highest_used - 1,
                     " is allocated; drain the node before shrinking it"));
  }
  if (spec.gpu_model != slot.node.spec.gpu_model && !slot.Idle()) {
    return absl::FailedPreconditionError(
        "gpu_model: the node holds gangs; drain it before changing its model");
  }
  return absl::OkStatus();
}

void Fleet::Upsert(const std::vector<Node>& nodes) {
  bool rebuild = false;
  for (const Node& node : nodes) {
    const int index = Find(node.spec.id);
    if (index >= 0) {
      rebuild |= slots_[index].node.spec.labels != node.spec.labels;
      if (slots_[index].node.spec != node.spec) ++layout_version_;
      slots_[index].node = node;
      continue;
    }
    Slot slot;
    slot.node = node;
    index_[node.spec.id] = static_cast<int>(slots_.size());
    slots_.push_back(std::move(slot));
    rebuild = true;
  }
  if (rebuild) Rebuild();
  const bool new_models = RefreshModels();
  ++structure_version_;
  ++version_;
  const bool wider = std::any_of(
      nodes.begin(), nodes.end(),
      [&](const Node& n) { return n.spec.gpu_count > free_index_.max_gpus(); });
  if (rebuild || new_models || wider) {
    Reindex();
    return;
  }
  for (const Node& node : nodes) IndexSlot(Find(node.spec.id));
}

bool Fleet::Remove(const NodeId& id) {
  int index = Find(id);
  if (index < 0) return false;
  PHALANX_CHECK(slots_[index].Idle());
  slots_.erase(slots_.begin() + index);
  Rebuild();
  RefreshModels();
  Reindex();
  ++structure_version_;
  ++version_;
  return true;
}

int Fleet::Find(const NodeId& id) const {
  auto it = index_.find(id);
  return it == index_.end() ? -1 : it->second;
}

bool Fleet::RefreshModels() {
  std::set<std::string> models;
  for (const Slot& slot : slots_) models.insert(slot.node.spec.gpu_model);
  std::vector<std::string> sorted(models.begin(), models.end());
  const bool changed = sorted != models_;
  models_ = std::move(sorted);
  for (Slot& slot : slots_) slot.model = ModelIndex(slot.node.spec.gpu_model);
  return changed;
}

int Fleet::ModelIndex(absl::string_view model) const {
  auto it = std::lower_bound(models_.begin(), models_.end(), model);
  return it != models_.end() && *it == model
             ? static_cast<int>(it - models_.begin())
             : -1;
}

// Rebuilds the free index from scratch (after slots or domains moved).
void Fleet::Reindex() {
  std::vector<int> leaf(slots_.size(), 0);
  std::vector<int> parent(domains_.size(), -1);
  for (size_t d = 0; d < domains_.size(); ++d) {
    for (int child : domains_[d].child_domains) parent[child] = d;
    if (!domains_[d].child_domains.empty()) continue;
    for (int i = domains_[d].node_begin; i < domains_[d].node_end; ++i) {
      leaf[i] = static_cast<int>(d);
    }
  }
  int max_gpus = 1;
  for (const Slot& slot : slots_) {
    max_gpus = std::max(max_gpus, slot.node.spec.gpu_count);
  }
  free_index_.Reset(std::move(leaf), std::move(parent),
                    static_cast<int>(models_.size()), max_gpus);
  for (size_t i = 0; i < slots_.size(); ++i) IndexSlot(static_cast<int>(i));
}

// Tells the free index what slot `index` offers now.
void Fleet::IndexSlot(int index) {
  const Slot& slot = slots_[index];
  const NodeSpec& spec = slot.node.spec;
  FreeIndex::SlotFree free;
  const int free_gpus = slot.FreeGpus();
  if (slot.node.state == NodeState::kReady && free_gpus > 0) {
    free.model = slot.model;
    free.free_gpus = free_gpus;
    if (spec.cpu_millis > 0) {
      free.cpu_per_gpu = static_cast<double>(std::max<int64_t>(
                             spec.cpu_millis - slot.used_cpu_millis, 0)) /
                         free_gpus;
    }
    if (spec.memory_bytes > 0) {
      free.memory_per_gpu =
          static_cast<double>(std::max<int64_t>(
              spec.memory_bytes - slot.used_memory_bytes, 0)) /
          free_gpus;
    }
  }
  free_index_.Set(index, free);
}

std::string Fleet::PathOf(const Node& node, int depth) const {
  std::vector<absl::string_view> parts;
  for (int i = 0; i < depth; ++i) {
    auto it = node.spec.labels.find(levels_[i]);
    parts.push_back(it == node.spec.labels.end()
                        ? absl::string_view()
                        : absl::string_view(it->second));
  }
  return absl::StrJoin(parts, "/");
}

// Sorts slots into fleet order and rebuilds the index and the domain tree.
void Fleet::Rebuild() {
  ++layout_version_;
  const int depth = static_cast<int>(levels_.size());
  std::vector<std::pair<std::string, Slot>> keyed;
  keyed.reserve(slots_.size());
  for (Slot& slot : slots_) {
    // "\x01" sorts below every printable character, so "b1/r1" < "b1/r10".
    std::string key = PathOf(slot.node, depth);
    std::replace(key.begin(), key.end(), '/', '\x01');
    keyed.emplace_back(absl::StrCat(key, "\x01", slot.node.spec.id.value()),
                       std::move(slot));
  }
  std::sort(keyed.begin(), keyed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  slots_.clear();
  index_.clear();
  for (auto& [key, slot] : keyed) {
    index_[slot.node.spec.id] = static_cast<int>(slots_.size());
    slots_.push_back(std::move(slot));
  }

  domains_.assign(1, Domain{"", -1, 0, static_cast<int>(slots_.size()), {}});
  domains_by_level_.assign(depth, {});
  for (int level = 0; level < depth; ++level) {
    std::vector<int> parents =
        level == 0 ? std::vector<int>{0} : domains_by_level_[level - 1];
    for (int parent : parents) {
      int begin = domains_[parent].node_begin;
      const int end = domains_[parent].node_end;
      while (begin < end) {
        std::string path = PathOf(slots_[begin].node, level + 1);
        int stop = begin + 1;
        while (stop < end && PathOf(slots_[stop].node, level + 1) == path) {
          ++stop;
        }
        const int id = static_cast<int>(domains_.size());
        domains_.push_back(Domain{std::move(path), level, begin, stop, {}});
        domains_[parent].child_domains.push_back(id);
        domains_by_level_[level].push_back(id);
        begin = stop;
      }
    }
  }
}

absl::Status Fleet::Allocate(const Gang& gang, GangHandle handle,
                             const std::vector<PodPlacement>& placement) {
  // Check every pod against the masks as they would be before changing any.
  // `taken` holds each slot's mask so far, in order of first use; a
  // placement lists a node's pods together, so the last entry is mostly
  // the one wanted.
  std::vector<std::pair<int, uint64_t>> taken;
  std::vector<int> indices;  // each pod's slot, found once
  indices.reserve(placement.size());
  for (const PodPlacement& pod : placement) {
    const int index = Find(pod.node);
    indices.push_back(index);
    if (index < 0) {
      return absl::NotFoundError(absl::StrCat(
          gang.id.value(), ": node \"", pod.node.value(), "\" does not exist"));
    }
    if (FindPodSet(gang.spec, pod.pod_set) == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          gang.id.value(), ": pod set \"", pod.pod_set, "\" does not exist"));
    }
    auto entry =
        std::find_if(taken.rbegin(), taken.rend(),
                     [index](const auto& t) { return t.first == index; });
    uint64_t& mask =
        entry != taken.rend()
            ? entry->second
            : taken.emplace_back(index, slots_[index].used_gpu_mask).second;
    for (int gpu : pod.gpu_indices) {
      if (gpu < 0 || gpu >= slots_[index].node.spec.gpu_count ||
          (mask >> gpu & 1)) {
        return absl::FailedPreconditionError(absl::StrCat(
            gang.id.value(), ": GPU ", gpu, " of node \"", pod.node.value(),
            "\" is held twice or does not exist"));
      }
      mask |= uint64_t{1} << gpu;
    }
  }
  for (size_t i = 0; i < placement.size(); ++i) {
    const PodPlacement& pod = placement[i];
    Slot& slot = slots_[indices[i]];
    const PodSetSpec* set = FindPodSet(gang.spec, pod.pod_set);
    for (int gpu : pod.gpu_indices) slot.used_gpu_mask |= uint64_t{1} << gpu;
    slot.used_cpu_millis += set->cpu_millis;
    slot.used_memory_bytes += set->memory_bytes;
    AddPods(slot, handle, +1);
  }
  for (const auto& [index, mask] : taken) IndexSlot(index);
  ++version_;
  return absl::OkStatus();
}

void Fleet::Release(const Gang& gang, GangHandle handle,
                    const std::vector<PodPlacement>& placement) {
  // The free index is told once per run of pods on one node (what it holds
  // depends only on the slot's final state, not on the steps to it).
  int last = -1;
  for (const PodPlacement& pod : placement) {
    const int index = Find(pod.node);
    const PodSetSpec* set = FindPodSet(gang.spec, pod.pod_set);
    PHALANX_CHECK(index >= 0 && set != nullptr);
    if (last >= 0 && last != index) IndexSlot(last);
    last = index;
    Slot& slot = slots_[index];
    for (int gpu : pod.gpu_indices) slot.used_gpu_mask &= ~(uint64_t{1} << gpu);
    slot.used_cpu_millis -= set->cpu_millis;
    slot.used_memory_bytes -= set->memory_bytes;
    AddPods(slot, handle, -1);
  }
  if (last >= 0) IndexSlot(last);
  ++version_;
}

void Fleet::AddPods(Slot& slot, GangHandle gang, int pods) {
  auto& list = slot.gang_pods;
  auto it = std::find_if(list.begin(), list.end(),
                         [gang](const GangPods& g) { return g.gang == gang; });
  if (it == list.end()) {
    PHALANX_CHECK(pods > 0);
    list.push_back({gang, pods});
    return;
  }
  it->pods += pods;
  PHALANX_CHECK(it->pods >= 0);
  if (it->pods == 0) {
    *it = list.back();
    list.pop_back();
  }
}

const PodSetSpec* FindPodSet(const GangSpec& spec, absl::string_view name) {
  for (const PodSetSpec& set : spec.pod_sets) {
    if (set.name == name) return &set;
  }
  return nullptr;
}

}  // namespace phalanx::core
