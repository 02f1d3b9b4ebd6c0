#include "core/plan.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace phalanx::core {
namespace {

// Pod sets in the order the plan sizes them: REQUIRED, then PREFERRED,
// then UNCONSTRAINED; the most GPUs first within each; then as listed.
std::vector<int> SetOrder(const GangSpec& spec) {
  std::vector<int> order(spec.pod_sets.size());
  std::iota(order.begin(), order.end(), 0);
  auto mode_rank = [](TopologyMode mode) {
    return mode == TopologyMode::kRequired    ? 0
           : mode == TopologyMode::kPreferred ? 1
                                              : 2;
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const PodSetSpec& x = spec.pod_sets[a];
    const PodSetSpec& y = spec.pod_sets[b];
    const int64_t gx = int64_t{x.gpus} * x.count;
    const int64_t gy = int64_t{y.gpus} * y.count;
    return std::make_pair(mode_rank(x.topology.mode), -gx) <
           std::make_pair(mode_rank(y.topology.mode), -gy);
  });
  return order;
}

bool ModelAllowed(const PodSetSpec& set, const Fleet::Slot& slot) {
  return set.gpu_models.empty() ||
         std::find(set.gpu_models.begin(), set.gpu_models.end(),
                   slot.node.spec.gpu_model) != set.gpu_models.end();
}

// Sizes a gang's pod sets by GPUs per node on `avail` (per slot, taken
// from as pods are placed): each set inside one domain of its level when
// it has one (the fullest domain that holds it; PREFERRED widens a level
// at a time), its pods on the least-free slots first.
class CountPlacer {
 public:
  CountPlacer(const Fleet& fleet, std::vector<int>& avail,
              const std::vector<char>* allowed)
      : fleet_(fleet), avail_(avail), allowed_(allowed) {}

  // Places every pod set of `spec`; false (and `avail` partly taken) when
  // one does not fit.
  bool Place(const GangSpec& spec, std::vector<Plan::Use>& uses) {
    for (int index : SetOrder(spec)) {
      const PodSetSpec& set = spec.pod_sets[index];
      if (set.gpus <= 0 || set.count <= 0) continue;
      if (!PlaceSet(set, uses)) return false;
    }
    return true;
  }

 private:
  int64_t PodsOn(const PodSetSpec& set, int slot) const {
    if (allowed_ != nullptr && !(*allowed_)[slot]) return 0;
    if (!ModelAllowed(set, fleet_.slots()[slot])) return 0;
    return avail_[slot] / set.gpus;
  }
  // Pods of `set` the slots of `d` hold, counting no further than `cap`.
  int64_t PodsIn(const PodSetSpec& set, const Fleet::Domain& d,
                 int64_t cap) const {
    int64_t pods = 0;
    for (int slot = d.node_begin; slot < d.node_end && pods < cap; ++slot) {
      pods += PodsOn(set, slot);
    }
    return pods;
  }
  // The domain of `level` with the fewest pods of `set` that still holds
  // it all (the first such in fleet order), or -1.
  int BestDomainAt(const PodSetSpec& set, int level) const {
    int best = -1;
    int64_t best_pods = 0;
    for (int domain : fleet_.DomainsAtLevel(level)) {
      const int64_t pods = PodsIn(set, fleet_.domains()[domain],
                                  std::numeric_limits<int64_t>::max());
      if (pods >= set.count && (best < 0 || pods < best_pods)) {
        best = domain;
        best_pods = pods;
      }
    }
    return best;
  }
  // The slot holding every pod of `set` with the fewest GPUs to spare, or
  // -1.
  int BestNode(const PodSetSpec& set) const {
    int best = -1;
    for (int slot = 0; slot < static_cast<int>(avail_.size()); ++slot) {
      if (PodsOn(set, slot) >= set.count &&
          (best < 0 || avail_[slot] < avail_[best])) {
        best = slot;
      }
    }
    return best;
  }
  // The domain the set goes into: 0 (the fleet) when unconstrained.
  int DomainFor(const PodSetSpec& set) const {
    if (set.topology.mode == TopologyMode::kUnconstrained) return 0;
    const int depth = static_cast<int>(fleet_.levels().size());
    const int level = fleet_.LevelIndex(set.topology.level);
    const bool required = set.topology.mode == TopologyMode::kRequired;
    for (int l = std::min(level, depth - 1); l >= 0; --l) {
      const int domain = BestDomainAt(set, l);
      if (domain >= 0 || required) return domain;
    }
    return required && depth > 0 && level >= 0 ? -1 : 0;
  }
  bool PlaceSet(const PodSetSpec& set, std::vector<Plan::Use>& uses) {
    const int depth = static_cast<int>(fleet_.levels().size());
    if (set.topology.mode != TopologyMode::kUnconstrained &&
        fleet_.LevelIndex(set.topology.level) == depth) {
      // One node for the whole set.
      const int slot = BestNode(set);
      if (slot >= 0) return Take(set, slot, set.count, uses);
      if (set.topology.mode == TopologyMode::kRequired) return false;
    }
    const int domain = DomainFor(set);
    if (domain < 0) return false;
    const Fleet::Domain& d = fleet_.domains()[domain];
    if (PodsIn(set, d, set.count) < set.count) return false;
    std::vector<int> slots;
    for (int slot = d.node_begin; slot < d.node_end; ++slot) {
      if (PodsOn(set, slot) > 0) slots.push_back(slot);
    }
    std::sort(slots.begin(), slots.end(), [this](int a, int b) {
      return std::make_pair(avail_[a], a) < std::make_pair(avail_[b], b);
    });
    int64_t left = set.count;
    for (int slot : slots) {
      if (left == 0) break;
      const int64_t pods = std::min(left, PodsOn(set, slot));
      Take(set, slot, pods, uses);
      left -= pods;
    }
    return left == 0;
  }
  bool Take(const PodSetSpec& set, int slot, int64_t pods,
            std::vector<Plan::Use>& uses) {
    const int gpus = static_cast<int>(pods * set.gpus);
    avail_[slot] -= gpus;
    uses.push_back({slot, gpus});
    return true;
  }

  const Fleet& fleet_;
  std::vector<int>& avail_;
  const std::vector<char>* allowed_;
};

// Merges the uses of one slot and sorts them by slot.
std::vector<Plan::Use> Merged(std::vector<Plan::Use> uses) {
  std::sort(
      uses.begin(), uses.end(),
      [](const Plan::Use& a, const Plan::Use& b) { return a.slot < b.slot; });
  std::vector<Plan::Use> merged;
  for (const Plan::Use& use : uses) {
    if (!merged.empty() && merged.back().slot == use.slot) {
      merged.back().gpus += use.gpus;
    } else {
      merged.push_back(use);
    }
  }
  return merged;
}

// The smallest domain of `fleet` holding every slot of `uses` (0: the
// fleet).
int SmallestDomain(const Fleet& fleet, const std::vector<Plan::Use>& uses) {
  if (uses.empty()) return 0;
  const int first = uses.front().slot;
  const int last = uses.back().slot;
  for (int level = static_cast<int>(fleet.levels().size()) - 1; level >= 0;
       --level) {
    for (int domain : fleet.DomainsAtLevel(level)) {
      const Fleet::Domain& d = fleet.domains()[domain];
      if (first < d.node_begin || first >= d.node_end) continue;
      if (last < d.node_end) return domain;
      break;
    }
  }
  return 0;
}

}  // namespace

const char* PlanStatusName(PlanStatus status) {
  switch (status) {
    case PlanStatus::kNotPending:
      return "NOT_PENDING";
    case PlanStatus::kUnplanned:
      return "UNPLANNED";
    case PlanStatus::kPlanned:
      return "PLANNED";
    case PlanStatus::kBeyondDepth:
      return "BEYOND_DEPTH";
    case PlanStatus::kBeyondWindow:
      return "BEYOND_WINDOW";
    case PlanStatus::kNeverFits:
      return "NEVER_FITS";
  }
  return "UNPLANNED";
}

void Plan::Clear() {
  made_ = false;
  made_at_ = absl::InfinitePast();
  free_now_.clear();
  events_.clear();
  avail_.clear();
  releases_.clear();
  entries_.clear();
  index_.clear();
  unplaced_.clear();
  slot_entries_.clear();
  binding_slots_.clear();
  next_rank_ = 1;
  tested_ = 0;
}

void Plan::Reset(const Fleet& fleet, const std::vector<Running>& running,
                 absl::Time now, const PlanningConfig& config) {
  Clear();
  config_ = config;
  made_ = true;
  made_at_ = now;
  structure_version_ = fleet.structure_version();
  const size_t slots = fleet.slots().size();
  free_now_.assign(slots, 0);
  events_.assign(slots, {});
  avail_.assign(slots, 0);
  slot_entries_.assign(slots, {});
  for (size_t i = 0; i < slots; ++i) {
    const Fleet::Slot& slot = fleet.slots()[i];
    if (slot.node.state == NodeState::kReady) free_now_[i] = slot.FreeGpus();
  }
  for (const Running& r : running) {
    for (const PodPlacement& pod : r.gang->placement) {
      const int slot = fleet.Find(pod.node);
      if (slot < 0 || fleet.slots()[slot].node.state != NodeState::kReady) {
        continue;
      }
      AddEvent(slot, r.end, static_cast<int>(pod.gpu_indices.size()));
    }
  }
}

void Plan::AddEvent(int slot, absl::Time time, int delta) {
  std::vector<Event>& events = events_[slot];
  auto at =
      std::upper_bound(events.begin(), events.end(), time,
                       [](absl::Time t, const Event& e) { return t < e.time; });
  events.insert(at, Event{time, delta});
  if (delta > 0) releases_.insert(time);
}

void Plan::RemoveEvent(int slot, absl::Time time, int delta) {
  std::vector<Event>& events = events_[slot];
  for (auto it = events.begin(); it != events.end(); ++it) {
    if (it->time == time && it->delta == delta) {
      events.erase(it);
      break;
    }
  }
  if (delta > 0) {
    if (auto it = releases_.find(time); it != releases_.end()) {
      releases_.erase(it);
    }
  }
}

void Plan::Apply(const std::vector<Use>& uses, absl::Time start, absl::Time end,
                 int sign) {
  for (const Use& use : uses) {
    if (sign < 0) {
      AddEvent(use.slot, start, -use.gpus);
      AddEvent(use.slot, end, use.gpus);
    } else {
      RemoveEvent(use.slot, start, -use.gpus);
      RemoveEvent(use.slot, end, use.gpus);
    }
  }
}

int64_t Plan::AvailableOver(absl::Time start, absl::Duration runtime) {
  const absl::Time end = start + runtime;
  int64_t total = 0;
  for (size_t slot = 0; slot < free_now_.size(); ++slot) {
    int free = free_now_[slot];
    const std::vector<Event>& events = events_[slot];
    size_t i = 0;
    for (; i < events.size() && events[i].time <= start; ++i) {
      free += events[i].delta;
    }
    int least = free;
    for (; i < events.size() && events[i].time < end; ++i) {
      free += events[i].delta;
      least = std::min(least, free);
    }
    avail_[slot] = std::max(0, least);
    total += avail_[slot];
  }
  return total;
}

PlannedStart Plan::Add(const Request& request, const Fleet& fleet,
                       absl::Time now) {
  PlannedStart result;
  const Gang& gang = *request.gang;
  if (full()) {
    result.status = PlanStatus::kBeyondDepth;
    return result;
  }
  std::vector<char> allowed;
  if (request.only_slots != nullptr) {
    allowed.assign(free_now_.size(), 0);
    for (int slot : *request.only_slots) allowed[slot] = 1;
  }
  const int64_t need = gang.spec.TotalGpus();
  // The candidate starts: now, then every time some node gains GPUs, up to
  // the window's end.
  const absl::Time last = now + config_.window;
  std::vector<absl::Time> starts = {now};
  for (auto it = releases_.upper_bound(now);
       it != releases_.end() && *it <= last; it = releases_.upper_bound(*it)) {
    starts.push_back(*it);
  }
  const std::vector<char>* only = allowed.empty() ? nullptr : &allowed;
  auto fits_at = [&](size_t i, std::vector<Use>& uses) {
    uses.clear();
    if (AvailableOver(starts[i], request.runtime) < need) return false;
    return CountPlacer(fleet, avail_, only).Place(gang.spec, uses);
  };
  // The earliest start that fits, found by galloping (1, 2, 4, … starts
  // on) and then bisecting below the first that fits: O(log starts)
  // sizings. Whether a gang fits is mostly monotone in time (capacity
  // frees as gangs end); where planned gangs make it not, the start found
  // still fits, and an earlier one may be missed.
  std::vector<Use> uses;
  size_t lo = 0;
  size_t found = starts.size();
  for (size_t i = 0, step = 1; i < starts.size(); step *= 2) {
    if (fits_at(i, uses)) {
      found = i;
      break;
    }
    lo = i + 1;
    if (i == starts.size() - 1) break;
    i = std::min(i + step, starts.size() - 1);
  }
  if (found < starts.size()) {
    while (lo < found) {
      const size_t mid = lo + (found - lo) / 2;
      if (fits_at(mid, uses)) {
        found = mid;
      } else {
        lo = mid + 1;
      }
    }
    fits_at(found, uses);
    return Record(request, fleet, starts[found], Merged(std::move(uses)));
  }
  result.status = releases_.upper_bound(last) != releases_.end()
                      ? PlanStatus::kBeyondWindow
                      : PlanStatus::kNeverFits;
  unplaced_[gang.id] = result.status;
  ++tested_;
  return result;
}

PlannedStart Plan::Record(const Request& request, const Fleet& fleet,
                          absl::Time start, std::vector<Use> uses) {
  Entry entry;
  entry.gang = request.gang->id;
  entry.rank = next_rank_++;
  entry.priority = request.gang->spec.priority;
  entry.binding = request.binding;
  entry.start = start;
  entry.end = start + request.runtime;
  entry.domain = SmallestDomain(fleet, uses);
  entry.path = fleet.domains()[entry.domain].path;
  entry.uses = std::move(uses);
  Apply(entry.uses, entry.start, entry.end, -1);
  const int index = static_cast<int>(entries_.size());
  for (const Use& use : entry.uses) {
    slot_entries_[use.slot].push_back(index);
    if (entry.binding) binding_slots_.push_back(use.slot);
  }
  if (entry.binding) {
    std::sort(binding_slots_.begin(), binding_slots_.end());
    binding_slots_.erase(
        std::unique(binding_slots_.begin(), binding_slots_.end()),
        binding_slots_.end());
  }
  index_[entry.gang] = index;
  ++tested_;
  entries_.push_back(std::move(entry));
  return Of(entries_.back().gang);
}

void Plan::Drop(const GangId& gang) {
  unplaced_.erase(gang);
  auto it = index_.find(gang);
  if (it == index_.end()) return;
  const int index = it->second;
  index_.erase(it);
  Entry& entry = entries_[index];
  Apply(entry.uses, entry.start, entry.end, +1);
  for (const Use& use : entry.uses) {
    std::vector<int>& on = slot_entries_[use.slot];
    on.erase(std::remove(on.begin(), on.end(), index), on.end());
  }
  entry.uses.clear();
  entry.binding = false;
}

void Plan::TakeCapacity(const std::vector<PodPlacement>& placement,
                        const Fleet& fleet, absl::Time from, absl::Time until) {
  // A plan that is due is made again from the fleet before it is read:
  // nothing to keep (and nothing grows while no one reads it).
  if (!MadeFor(fleet) || from >= made_at_ + config_.interval) return;
  for (const PodPlacement& pod : placement) {
    const int slot = fleet.Find(pod.node);
    if (slot < 0 || free_now_.empty()) continue;
    const int gpus = static_cast<int>(pod.gpu_indices.size());
    AddEvent(slot, from, -gpus);
    AddEvent(slot, until, gpus);
  }
}

void Plan::Release(const GangId& gang) {
  if (auto it = index_.find(gang); it != index_.end()) {
    entries_[it->second].binding = false;
  }
}

const Plan::Entry* Plan::EntryOf(const GangId& gang) const {
  auto it = index_.find(gang);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

PlannedStart Plan::Of(const GangId& gang) const {
  PlannedStart result;
  if (const Entry* entry = EntryOf(gang)) {
    result.status = PlanStatus::kPlanned;
    result.start = entry->start;
    result.domain = entry->path;
    result.rank = entry->rank;
    return result;
  }
  if (auto it = unplaced_.find(gang); it != unplaced_.end()) {
    result.status = it->second;
  } else if (made_ && full()) {
    result.status = PlanStatus::kBeyondDepth;
  }
  return result;
}

bool Plan::MayUse(int slot, int rank, int priority, absl::Time now,
                  absl::Time end) const {
  if (slot >= static_cast<int>(slot_entries_.size())) return true;
  for (int index : slot_entries_[slot]) {
    const Entry& entry = entries_[index];
    const bool other =
        rank > 0 ? entry.rank != rank : entry.priority >= priority;
    if (!entry.binding || !other) continue;
    if (entry.start < end && entry.end > now) return false;
  }
  return true;
}

}  // namespace phalanx::core
