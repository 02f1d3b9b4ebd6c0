// The plan (docs/design.md §4 step 5): an expected start, a domain and the
// GPUs per node for every pending gang in admission order, up to
// PlanningConfig::max_gangs and within PlanningConfig::window.
//
// A profile keeps, per node, its free GPUs over time: GPUs free now, GPUs a
// running gang frees at its expected end (estimate, else max_runtime, else
// the configured default), and the GPUs each planned gang takes from its
// start to its expected end. Planning a gang finds the earliest time at
// which the whole gang fits for its expected run time on what the profile
// leaves — its pod sets by GPU count per node, REQUIRED and PREFERRED
// topology met by one domain of the level — and takes that capacity from
// the profile, so no gang planned later can move its start. Slices and
// NVLink groups are not modelled: the plan sizes a gang by GPUs per node,
// and the real placer decides the exact GPUs at admission.
//
// Pure and deterministic; not thread-safe.
#ifndef PHALANX_CORE_PLAN_H_
#define PHALANX_CORE_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "core/fleet.h"
#include "core/model.h"

namespace phalanx::core {

// Where a gang stands in the plan.
enum class PlanStatus {
  kNotPending,    // not PENDING: nothing to plan
  kUnplanned,     // no plan includes it yet (it came after the last one)
  kPlanned,       // it has a planned start
  kBeyondDepth,   // more than max_gangs gangs are ahead of it
  kBeyondWindow,  // it would start later than the window allows
  kNeverFits,     // no time in the window fits it on the fleet as built
};

// "PLANNED", "BEYOND_DEPTH", …: the API enum's suffix.
const char* PlanStatusName(PlanStatus status);

// A gang's place in the plan.
struct PlannedStart {
  PlanStatus status = PlanStatus::kUnplanned;
  absl::Time start = absl::InfiniteFuture();  // when kPlanned
  std::string domain;  // its planned domain's path; "" = the fleet
  int rank = 0;        // 1-based position among planned gangs; 0 = none
  bool operator==(const PlannedStart&) const = default;
};

// The plan: its entries and the profile they were planned on.
class Plan {
 public:
  // GPUs a planned gang takes on the node at a fleet slot.
  struct Use {
    int slot = 0;
    int gpus = 0;
  };
  struct Entry {
    GangId gang;
    int rank = 0;      // 1-based, in the order the gangs were planned
    int priority = 0;  // the gang's
    // Whether it holds its capacity against gangs behind it (a gang its
    // queue's quota or a hold refuses does not: it may not start then).
    bool binding = true;
    absl::Time start;
    absl::Time end;
    int domain = 0;    // the smallest Fleet domain holding every use
    std::string path;  // that domain's path; "" = the fleet
    std::vector<Use> uses;
  };
  // A gang to plan.
  struct Request {
    const Gang* gang = nullptr;
    absl::Duration runtime;  // how long it is expected to run
    bool binding = true;
    // When set, the only slots it may use (sorted): a reservation's nodes.
    const std::vector<int>* only_slots = nullptr;
  };
  // A gang holding capacity and when it is expected to end.
  struct Running {
    const Gang* gang = nullptr;
    absl::Time end;
  };

  // Starts over at `now` on `fleet`: every READY node's free GPUs now, and
  // the GPUs of `running` gangs freed at their expected ends. Forgets every
  // entry.
  void Reset(const Fleet& fleet, const std::vector<Running>& running,
             absl::Time now, const PlanningConfig& config);
  // Plans `request` behind every planned gang: the earliest start within
  // the window at which the whole gang fits for its run time on what the
  // profile leaves. Returns where it stands (kPlanned, kBeyondDepth,
  // kBeyondWindow or kNeverFits); a planned gang takes its capacity from
  // the profile. `fleet` must be the one of the last Reset.
  PlannedStart Add(const Request& request, const Fleet& fleet, absl::Time now);
  // Takes the GPUs of `placement` on `fleet` from `from` to `until`: a gang
  // admitted since the plan was made, so gangs planned later (arrivals)
  // are planned on the capacity in force.
  void TakeCapacity(const std::vector<PodPlacement>& placement,
                    const Fleet& fleet, absl::Time from, absl::Time until);
  // Lets the capacity of `gang`'s entry go to others: its planned start has
  // come and it did not fit (the plan sizes by GPU counts; slices or an
  // overrunning gang can still keep it out). It stays planned.
  void Release(const GangId& gang);
  // Forgets the entry of `gang` (it left PENDING) and gives its capacity
  // back to the profile; the starts of later entries stay as planned.
  void Drop(const GangId& gang);
  // Where `gang`, which is PENDING, stands: its entry, else kBeyondDepth
  // when the plan is full, else kUnplanned.
  PlannedStart Of(const GangId& gang) const;
  // The entry of `gang`, or null.
  const Entry* EntryOf(const GangId& gang) const;
  // The rank of `gang`'s entry, or 0.
  int RankOf(const GangId& gang) const {
    const Entry* entry = EntryOf(gang);
    return entry == nullptr ? 0 : entry->rank;
  }
  // How many GPUs a gang may take on the node at `slot` from `now` until
  // `end` without taking capacity the plan gives a gang ahead of it then:
  // the node's least free GPUs over that time once the entries that do not
  // hold the node against it are given back. An entry holds it when it is
  // binding and ranked before the gang's own (`rank`); gangs behind were
  // planned around it. A gang the plan has not seen yet (`rank` 0: it
  // arrived since) is held back by entries of at least its `priority` (the
  // next plan puts a gang of higher priority first). With `behind_too`,
  // every binding entry but the gang's own holds the node. kNoLimit when no
  // entry holds it.
  int RoomOn(int slot, int rank, int priority, bool behind_too, absl::Time now,
             absl::Time end) const;
  static constexpr int kNoLimit = 1 << 30;
  // The slots some binding entry uses, sorted.
  const std::vector<int>& BindingSlots() const { return binding_slots_; }
  // Whether the plan was made for a fleet of this structure version.
  bool MadeFor(const Fleet& fleet) const {
    return made_ && structure_version_ == fleet.structure_version();
  }
  bool made() const { return made_; }
  const PlanningConfig& config() const { return config_; }
  absl::Time made_at() const { return made_at_; }
  int size() const { return static_cast<int>(index_.size()); }
  // Whether max_gangs gangs were tried (planned or not).
  bool full() const { return tested_ >= config_.max_gangs; }
  // Every entry in rank order; a dropped one has no uses.
  const std::vector<Entry>& entries() const { return entries_; }
  // Makes the plan due for making again (Planner), keeping it until then.
  void MarkStale() { made_at_ = absl::InfinitePast(); }
  // Makes the plan empty and unmade (planning off).
  void Clear();

 private:
  struct Event {
    absl::Time time;
    int delta;  // GPUs freed (> 0) or taken (< 0) at `time`
    int level;  // the slot's free GPUs once this event is in
  };
  // The entry the last plan had for `request`'s gang, started no earlier
  // than now, when its nodes still have room for it: a re-plan moves no
  // gang later than it was planned unless the room is gone.
  std::optional<Entry> KeepPrevious(const Request& request, absl::Time now);
  // The first of the candidate starts — now, then each time some node
  // gains GPUs, up to `last` — at which the fleet's free GPUs in total stay
  // at least `need` for `runtime` (necessary for a gang of `need` GPUs to
  // fit) and `fits` says yes; tried in time order. nullopt if none.
  std::optional<absl::Time> FirstStartWithRoom(
      absl::Time now, absl::Time last, absl::Duration runtime, int64_t need,
      absl::FunctionRef<bool(absl::Time)> fits) const;
  // The earliest start in [from, last] at which `request` fits on what the
  // profile leaves (on the `only` slots when set), with its uses; nullopt
  // if none.
  std::optional<absl::Time> EarliestFit(const Request& request,
                                        const Fleet& fleet, absl::Time from,
                                        absl::Time last,
                                        const std::vector<char>* only,
                                        std::vector<Use>& uses);
  using ReleaseIt = std::vector<std::pair<absl::Time, int>>::const_iterator;
  // The first (time, slot) of release_slots_ after `time`.
  ReleaseIt FirstReleaseAfter(absl::Time time) const;
  // Free GPUs of every slot over [start, start + runtime), into avail_;
  // returns their sum.
  int64_t AvailableOver(absl::Time start, absl::Duration runtime);
  // Adds an entry for `request` at `start` on `uses`.
  PlannedStart Record(const Request& request, const Fleet& fleet,
                      absl::Time start, std::vector<Use> uses);
  // Takes `uses` from `start` to `end` (sign -1) or gives them back (+1).
  void Apply(const std::vector<Use>& uses, absl::Time start, absl::Time end,
             int sign);
  void AddEvent(int slot, absl::Time time, int delta);
  // Whether some node gaining GPUs in (from, to] has more free GPUs over
  // [to, to + runtime) than avail_ says; lowers avail_ to them otherwise.
  bool GainsSince(absl::Time from, absl::Time to, absl::Duration runtime);
  // Sets Event::level of the slot's events from index `from` on.
  void Relevel(int slot, size_t from);
  // Calls visit(time, level) with the slot's free GPUs at `from`, then
  // after each time in (from, until) at which events change them, in order.
  template <typename Visit>
  void ForEachLevel(int slot, absl::Time from, absl::Time until,
                    Visit visit) const;
  // The least free GPUs of the slot over [from, until).
  int LeastFree(int slot, absl::Time from, absl::Time until) const;
  void RemoveEvent(int slot, absl::Time time, int delta);
  // Keeps the fleet-wide totals in step with a slot's event: `delta` GPUs
  // and `releases` more (or fewer) slots gaining GPUs at `time`.
  void ChangeTotal(absl::Time time, int64_t delta, int releases);

  PlanningConfig config_;
  bool made_ = false;
  absl::Time made_at_ = absl::InfinitePast();
  uint64_t structure_version_ = 0;
  uint64_t layout_version_ = 0;             // the fleet's, for previous_
  std::vector<int> free_now_;               // per slot; 0 when not READY
  std::vector<std::vector<Event>> events_;  // per slot, by time
  std::vector<int> avail_;                  // scratch: per slot
  // The fleet's free GPUs now and their changes over time, in total; a
  // time at which some slot gains GPUs (releases > 0) is a candidate start.
  struct TotalStep {
    absl::Time time;
    int64_t delta = 0;  // GPUs, summed over the slots
    int releases = 0;   // slot events freeing GPUs at `time`
  };
  int64_t total_free_now_ = 0;
  std::vector<TotalStep> total_steps_;        // by time, one per time
  mutable std::vector<int64_t> scan_levels_;  // scratch
  // Every (time, slot) at which the slot gains GPUs, sorted.
  std::vector<std::pair<absl::Time, int>> release_slots_;
  std::vector<int> placer_avail_;  // scratch: avail_ as the placer takes it
  std::vector<Entry> entries_;     // dropped ones have no gang
  // The last plan's entries, by gang, while a new plan is made.
  absl::flat_hash_map<GangId, Entry> previous_;
  absl::flat_hash_map<GangId, int> index_;  // gang -> entries_ index
  // Gangs tried and not planned: beyond the window, or never fitting.
  absl::flat_hash_map<GangId, PlanStatus> unplaced_;
  int tested_ = 0;                              // gangs tried since Reset
  std::vector<std::vector<int>> slot_entries_;  // per slot: entries_ indexes
  std::vector<int> binding_slots_;
  int next_rank_ = 1;
  // The earliest start found at `floors_now_` for gangs of each placement
  // shape, by run time (InfiniteFuture: none within the window). While the
  // profile only loses capacity (gangs planned or admitted, nothing given
  // back), a gang of that shape running at least as long cannot start
  // earlier, so its search begins there. Forgotten when capacity comes back
  // (Drop, Reset) or time moves. Exact while CountPlacer never fails on
  // more room where it fits on less (GainsSince assumes the same);
  // otherwise a start may be later than the earliest, never overbooked.
  struct ShapeFloor {
    absl::Duration runtime;
    absl::Time start;
  };
  absl::flat_hash_map<std::string, std::vector<ShapeFloor>> shape_floors_;
  absl::Time floors_now_ = absl::InfinitePast();
  // The latest floor of `shape` for a run of `runtime`, or InfinitePast.
  absl::Time FloorOf(const std::string& shape, absl::Duration runtime) const;
  void NoteFloor(const std::string& shape, absl::Duration runtime,
                 absl::Time start);
};

// The GPUs `pods` take on each node, by fleet slot.
absl::flat_hash_map<int, int> GpusBySlot(const std::vector<PodPlacement>& pods,
                                         const Fleet& fleet);

// A gang's room in the plan for one admission attempt: Plan::RoomOn per
// node, asked once each.
class PlanRoom {
 public:
  PlanRoom(const Plan& plan, int rank, int priority, absl::Time now,
           absl::Time end, bool behind_too = false)
      : plan_(plan),
        rank_(rank),
        priority_(priority),
        behind_too_(behind_too),
        now_(now),
        end_(end) {}
  // The same gang's room when the gangs behind it hold their capacity too.
  PlanRoom BehindToo() const {
    return PlanRoom(plan_, rank_, priority_, now_, end_, true);
  }
  // Whether the gang may put a pod on the node at `slot` at all.
  bool Allows(int slot) { return RoomOn(slot) > 0; }
  // The GPUs to keep from the gang so that no placement can take more of a
  // node than its room there, on each node where `pods` do: as pods of one
  // pod set named "held", the highest free GPUs of each such node. Empty
  // when `pods` stay within the room.
  std::vector<PodPlacement> Excess(const std::vector<PodPlacement>& pods,
                                   const Fleet& fleet);

 private:
  int RoomOn(int slot);

  const Plan& plan_;
  const int rank_;
  const int priority_;
  const bool behind_too_;
  const absl::Time now_;
  const absl::Time end_;
  absl::flat_hash_map<int, int> room_;  // slot -> GPUs
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_PLAN_H_
