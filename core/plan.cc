#include "core/plan.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/placement.h"

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
  total_free_now_ = 0;
  total_steps_.clear();
  release_slots_.clear();
  entries_.clear();
  index_.clear();
  unplaced_.clear();
  slot_entries_.clear();
  binding_slots_.clear();
  next_rank_ = 1;
  tested_ = 0;
  shape_floors_.clear();
}

void Plan::Reset(const Fleet& fleet, const std::vector<Running>& running,
                 absl::Time now, const PlanningConfig& config) {
  // The last plan's entries name slots of the fleet it was made for: the
  // same nodes while the layout holds (a node that failed meanwhile has no
  // room, so no entry on it is kept).
  previous_.clear();
  if (made_ && layout_version_ == fleet.layout_version()) {
    for (Entry& entry : entries_) {
      if (!entry.uses.empty()) previous_.emplace(entry.gang, std::move(entry));
    }
  }
  Clear();
  config_ = config;
  made_ = true;
  made_at_ = now;
  structure_version_ = fleet.structure_version();
  layout_version_ = fleet.layout_version();
  const size_t slots = fleet.slots().size();
  free_now_.assign(slots, 0);
  events_.assign(slots, {});
  avail_.assign(slots, 0);
  slot_entries_.assign(slots, {});
  for (size_t i = 0; i < slots; ++i) {
    const Fleet::Slot& slot = fleet.slots()[i];
    if (slot.node.state == NodeState::kReady) free_now_[i] = slot.FreeGpus();
    total_free_now_ += free_now_[i];
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
  at = events.insert(at, Event{time, delta, 0});
  Relevel(slot, static_cast<size_t>(at - events.begin()));
  if (delta > 0) {
    const std::pair<absl::Time, int> release(time, slot);
    release_slots_.insert(
        std::upper_bound(release_slots_.begin(), release_slots_.end(), release),
        release);
  }
  ChangeTotal(time, delta, delta > 0 ? 1 : 0);
}

bool Plan::GainsSince(absl::Time from, absl::Time to, absl::Duration runtime) {
  for (auto it = FirstReleaseAfter(from);
       it != release_slots_.end() && it->first <= to; ++it) {
    const int slot = it->second;
    const int room = std::max(0, LeastFree(slot, to, to + runtime));
    if (room > avail_[slot]) return true;
    avail_[slot] = room;
  }
  return false;
}

void Plan::Relevel(int slot, size_t from) {
  std::vector<Event>& events = events_[slot];
  int level = from == 0 ? free_now_[slot] : events[from - 1].level;
  for (size_t i = from; i < events.size(); ++i) {
    level += events[i].delta;
    events[i].level = level;
  }
}

template <typename Visit>
void Plan::ForEachLevel(int slot, absl::Time from, absl::Time until,
                        Visit visit) const {
  const std::vector<Event>& events = events_[slot];
  auto it =
      std::upper_bound(events.begin(), events.end(), from,
                       [](absl::Time t, const Event& e) { return t < e.time; });
  visit(from, it == events.begin() ? free_now_[slot] : std::prev(it)->level);
  for (; it != events.end() && it->time < until; ++it) {
    auto next = std::next(it);
    // The level once every change at this time is in.
    if (next == events.end() || next->time != it->time) {
      visit(it->time, it->level);
    }
  }
}

int Plan::LeastFree(int slot, absl::Time from, absl::Time until) const {
  int least = std::numeric_limits<int>::max();
  ForEachLevel(slot, from, until, [&least](absl::Time, int level) {
    least = std::min(least, level);
  });
  return least;
}

void Plan::RemoveEvent(int slot, absl::Time time, int delta) {
  std::vector<Event>& events = events_[slot];
  for (auto it = events.begin(); it != events.end(); ++it) {
    if (it->time == time && it->delta == delta) {
      it = events.erase(it);
      Relevel(slot, static_cast<size_t>(it - events.begin()));
      if (delta > 0) {
        auto release =
            std::lower_bound(release_slots_.begin(), release_slots_.end(),
                             std::make_pair(time, slot));
        if (release != release_slots_.end() &&
            *release == std::make_pair(time, slot)) {
          release_slots_.erase(release);
        }
      }
      ChangeTotal(time, -delta, delta > 0 ? -1 : 0);
      break;
    }
  }
}

void Plan::ChangeTotal(absl::Time time, int64_t delta, int releases) {
  auto at = std::lower_bound(
      total_steps_.begin(), total_steps_.end(), time,
      [](const TotalStep& step, absl::Time t) { return step.time < t; });
  if (at == total_steps_.end() || at->time != time) {
    at = total_steps_.insert(at, TotalStep{time, 0, 0});
  }
  at->delta += delta;
  at->releases += releases;
  if (at->delta == 0 && at->releases == 0) total_steps_.erase(at);
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

std::optional<Plan::Entry> Plan::KeepPrevious(const Request& request,
                                              absl::Time now) {
  auto it = previous_.find(request.gang->id);
  if (it == previous_.end()) return std::nullopt;
  Entry entry = std::move(it->second);
  previous_.erase(it);
  entry.start = std::max(entry.start, now);
  if (entry.start > now + config_.window) return std::nullopt;
  const absl::Time end = entry.start + request.runtime;
  for (const Use& use : entry.uses) {
    if (use.slot >= static_cast<int>(events_.size()) ||
        LeastFree(use.slot, entry.start, end) < use.gpus) {
      return std::nullopt;
    }
    if (request.only_slots != nullptr &&
        !std::binary_search(request.only_slots->begin(),
                            request.only_slots->end(), use.slot)) {
      return std::nullopt;
    }
  }
  return entry;
}

std::optional<absl::Time> Plan::FirstStartWithRoom(
    absl::Time now, absl::Time last, absl::Duration runtime, int64_t need,
    absl::FunctionRef<bool(absl::Time)> fits) const {
  // Step k > 0 is total_steps_[first + k - 1]; step 0 is now, with every
  // change up to now folded in. level(k): the fleet's free GPUs in total
  // from step k's time on, summed as the scan reaches it.
  size_t first = 0;
  int64_t level_now = total_free_now_;
  for (; first < total_steps_.size() && total_steps_[first].time <= now;
       ++first) {
    level_now += total_steps_[first].delta;
  }
  const size_t steps = total_steps_.size() - first + 1;
  auto time_of = [&](size_t k) {
    return k == 0 ? now : total_steps_[first + k - 1].time;
  };
  std::vector<int64_t>& levels = scan_levels_;
  levels.assign(1, level_now);
  auto level_of = [&](size_t k) {
    while (levels.size() <= k) {
      levels.push_back(levels.back() +
                       total_steps_[first + levels.size() - 1].delta);
    }
    return levels[k];
  };
  // Steps [at, good_until) leave the fleet at least `need` GPUs. A step
  // below `need` within a candidate's run rules out every candidate up to
  // it, so the scan moves on past it.
  size_t good_until = 0;
  for (size_t at = 0; at < steps && time_of(at) <= last;) {
    if (at > 0 && total_steps_[first + at - 1].releases == 0) {
      ++at;
      continue;
    }
    const absl::Time start = time_of(at);
    const absl::Time until = start + runtime;
    good_until = std::max(good_until, at);
    while (good_until < steps && time_of(good_until) < until &&
           level_of(good_until) >= need) {
      ++good_until;
    }
    if (good_until < steps && time_of(good_until) < until) {
      at = good_until + 1;
      continue;
    }
    if (fits(start)) return start;
    ++at;
  }
  return std::nullopt;
}

Plan::ReleaseIt Plan::FirstReleaseAfter(absl::Time time) const {
  return std::upper_bound(
      release_slots_.begin(), release_slots_.end(),
      std::make_pair(time, std::numeric_limits<int>::max()));
}

int64_t Plan::AvailableOver(absl::Time start, absl::Duration runtime) {
  const absl::Time end = start + runtime;
  int64_t total = 0;
  for (size_t slot = 0; slot < free_now_.size(); ++slot) {
    avail_[slot] = std::max(0, LeastFree(static_cast<int>(slot), start, end));
    total += avail_[slot];
  }
  return total;
}

std::optional<absl::Time> Plan::EarliestFit(const Request& request,
                                            const Fleet& fleet, absl::Time from,
                                            absl::Time last,
                                            const std::vector<char>* only,
                                            std::vector<Use>& uses) {
  const int64_t need = request.gang->spec.TotalGpus();
  // Between two tries only the nodes that gain GPUs in between can have
  // more room over the run (the others only lose some, as the run ends
  // later), so a gang refused at one start is tried again only once one
  // of those has more room than then.
  std::optional<absl::Time> refused;
  return FirstStartWithRoom(
      from, last, request.runtime, need, [&](absl::Time at) {
        const bool again =
            !refused || GainsSince(*refused, at, request.runtime);
        refused = at;
        if (!again || AvailableOver(at, request.runtime) < need) return false;
        placer_avail_ = avail_;
        uses.clear();
        return CountPlacer(fleet, placer_avail_, only)
            .Place(request.gang->spec, uses);
      });
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
  const absl::Time last = now + config_.window;
  const std::vector<char>* only = allowed.empty() ? nullptr : &allowed;
  // The earliest start that fits, tried in time order among the starts at
  // which the fleet as a whole has room for the gang throughout its run,
  // from the floor of its shape on.
  std::optional<Entry> kept = KeepPrevious(request, now);
  std::vector<Use> uses;
  const absl::Time before = kept ? kept->start - absl::Nanoseconds(1) : last;
  // A gang on reserved nodes only is not like others of its shape.
  std::string shape;
  absl::Time from = now;
  if (only == nullptr) {
    if (floors_now_ != now) {
      shape_floors_.clear();
      floors_now_ = now;
    }
    shape = PlacementShapeKey(gang.spec);
    from = std::max(now, FloorOf(shape, request.runtime));
  }
  std::optional<absl::Time> start;
  if (from <= before) {
    start = EarliestFit(request, fleet, from, before, only, uses);
  }
  if (only == nullptr) {
    NoteFloor(shape, request.runtime,
              start  ? *start
              : kept ? kept->start
                     : absl::InfiniteFuture());
  }
  if (start) {
    return Record(request, fleet, *start, Merged(std::move(uses)));
  }
  if (kept) {
    return Record(request, fleet, kept->start, std::move(kept->uses));
  }
  result.status = FirstReleaseAfter(last) != release_slots_.end()
                      ? PlanStatus::kBeyondWindow
                      : PlanStatus::kNeverFits;
  unplaced_[gang.id] = result.status;
  ++tested_;
  return result;
}

absl::Time Plan::FloorOf(const std::string& shape,
                         absl::Duration runtime) const {
  absl::Time floor = absl::InfinitePast();
  auto it = shape_floors_.find(shape);
  if (it == shape_floors_.end()) return floor;
  for (const ShapeFloor& known : it->second) {
    if (known.runtime <= runtime) floor = std::max(floor, known.start);
  }
  return floor;
}

void Plan::NoteFloor(const std::string& shape, absl::Duration runtime,
                     absl::Time start) {
  if (FloorOf(shape, runtime) >= start) return;  // known already
  std::vector<ShapeFloor>& floors = shape_floors_[shape];
  // A floor no shorter run and no later start than another says nothing
  // more.
  auto weaker = [&](const ShapeFloor& f) {
    return f.runtime >= runtime && f.start <= start;
  };
  floors.erase(std::remove_if(floors.begin(), floors.end(), weaker),
               floors.end());
  floors.push_back({runtime, start});
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
  shape_floors_.clear();  // its capacity comes back
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
  // A plan that only estimates and is due is made again from the fleet
  // before it is read: nothing to keep (and nothing grows while no one
  // reads it). A binding plan is made again every interval by the cycle,
  // and the gangs admitted before that in the cycle must count.
  if (!MadeFor(fleet)) return;
  if (!config_.binding && from >= made_at_ + config_.interval) return;
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

int Plan::RoomOn(int slot, int rank, int priority, bool behind_too,
                 absl::Time now, absl::Time end) const {
  if (slot >= static_cast<int>(slot_entries_.size())) return kNoLimit;
  const std::vector<int>& on = slot_entries_[slot];
  auto holds = [&](const Entry& entry) {
    if (!entry.binding || (rank > 0 && entry.rank == rank)) return false;
    if (behind_too) return true;
    return rank > 0 ? entry.rank < rank : entry.priority >= priority;
  };
  if (std::none_of(on.begin(), on.end(),
                   [&](int index) { return holds(entries_[index]); })) {
    return kNoLimit;
  }
  // The GPUs the entries that do not hold the node take, given back: each
  // adds its GPUs here from its start until its end.
  std::vector<std::pair<absl::Time, int>> back;
  for (int index : on) {
    const Entry& entry = entries_[index];
    if (holds(entry)) continue;
    for (const Use& use : entry.uses) {
      if (use.slot != slot) continue;
      back.emplace_back(entry.start, use.gpus);
      back.emplace_back(entry.end, -use.gpus);
    }
  }
  std::sort(back.begin(), back.end());
  size_t next_back = 0;
  int given = 0;
  auto given_back = [&](absl::Time time) {  // called with times in order
    for (; next_back < back.size() && back[next_back].first <= time;
         ++next_back) {
      given += back[next_back].second;
    }
    return given;
  };
  int room = std::numeric_limits<int>::max();
  ForEachLevel(slot, now, end, [&](absl::Time time, int level) {
    room = std::min(room, level + given_back(time));
  });
  return room;
}

int PlanRoom::RoomOn(int slot) {
  auto [it, inserted] = room_.try_emplace(slot, 0);
  if (inserted)
    it->second = plan_.RoomOn(slot, rank_, priority_, behind_too_, now_, end_);
  return it->second;
}

absl::flat_hash_map<int, int> GpusBySlot(const std::vector<PodPlacement>& pods,
                                         const Fleet& fleet) {
  absl::flat_hash_map<int, int> taken;
  for (const PodPlacement& pod : pods) {
    taken[fleet.Find(pod.node)] += static_cast<int>(pod.gpu_indices.size());
  }
  return taken;
}

std::vector<PodPlacement> PlanRoom::Excess(
    const std::vector<PodPlacement>& pods, const Fleet& fleet) {
  std::vector<PodPlacement> held;
  for (const auto& [slot, gpus] : GpusBySlot(pods, fleet)) {
    if (gpus <= RoomOn(slot)) continue;
    const Fleet::Slot& on = fleet.slots()[slot];
    PodPlacement hold;
    hold.pod_set = "held";
    hold.node = on.node.spec.id;
    int keep = on.FreeGpus() - std::max(0, RoomOn(slot));
    for (int gpu = on.node.spec.gpu_count - 1; gpu >= 0 && keep > 0; --gpu) {
      if (on.TakenGpuMask() >> gpu & 1) continue;
      hold.gpu_indices.insert(hold.gpu_indices.begin(), gpu);
      --keep;
    }
    held.push_back(std::move(hold));
  }
  std::sort(held.begin(), held.end(),
            [](const PodPlacement& a, const PodPlacement& b) {
              return a.node < b.node;
            });
  return held;
}

}  // namespace phalanx::core
