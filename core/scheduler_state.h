// SchedulerState: the owners of the scheduling state — the configuration,
// the fleet, the gang table, the change log, the quota book, request keys,
// reservations, preemptions, deadlines and fit caches, each the only writer
// of its own — and the few operations that change several of them in step
// (storing a gang record, admitting, releasing, requeueing a victim,
// marking a node). The Scheduler's commands and the admission cycle's
// phases (AdmissionCycle, Housekeeping, NodeVacator, Preemptor) work on it;
// nothing outside core sees it. Owned by one thread; not thread-safe.
#ifndef PHALANX_CORE_SCHEDULER_STATE_H_
#define PHALANX_CORE_SCHEDULER_STATE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/change_log.h"
#include "core/deadlines.h"
#include "core/fit_cache.h"
#include "core/fleet.h"
#include "core/gang_table.h"
#include "core/model.h"
#include "core/placement.h"
#include "core/plan.h"
#include "core/preemption_book.h"
#include "core/quota_book.h"
#include "core/request_keys.h"
#include "core/reservation_book.h"

namespace phalanx::core {

class SchedulerState {
 public:
  // Gangs moved off failed or drained nodes since this process started, by
  // (outcome: "repaired" | "evicted", cause: "unhealthy" | "drain_deadline").
  using VacateCounts = std::map<std::pair<std::string, std::string>, int64_t>;

  explicit SchedulerState(Config config);
  SchedulerState(const SchedulerState&) = delete;
  SchedulerState& operator=(const SchedulerState&) = delete;

  // Stores `gang` and tells the owners that follow it (reservations, holds,
  // victims, the change log).
  GangPtr Put(Gang gang);
  // Put with a new revision and an event of `type`.
  GangPtr Transition(Gang gang, EventType type, absl::Time now);
  // Frees the capacity `gang` holds (its placement stays, released) and
  // adds the attempt's held time (now - admit_time) to previous_run_time.
  void ReleaseCapacity(Gang& gang, absl::Time now);
  // ADMITTED on `pods`, which must be free: allocates them, charges the
  // queue, arms the start timeout; sets first_admit_time at the first.
  // `on_loan`: the attempt borrows reserved nodes (Gang::on_loan).
  void Admit(const GangPtr& gang, std::vector<PodPlacement> pods,
             absl::Time now, bool on_loan = false);
  // Moves `gang`, which holds GPUs, to `pods` (its pods that stay keep
  // their GPUs; new ones must be free), re-charges its queue and stores it
  // with a RESIZED event (core/resizer.h).
  GangPtr Resize(Gang gang, std::vector<PodPlacement> pods, absl::Time now);
  // Sets a gang's pending reason (no event, no revision).
  void SetReason(const GangPtr& gang, ReasonCode code, std::string reason);
  // Makes `victim` (PREEMPTING) PENDING, its GPUs released and the
  // requeue counted in its `preemptions`; stores nothing.
  void RequeueVictim(Gang& victim, absl::Time now);
  // RequeueVictim, then stores the victim with a REQUEUED event.
  void FinishPreemption(Gang victim, absl::Time now);
  void DeleteGang(const GangId& id);
  // Moves the capacity epoch: pending gangs may newly fit.
  void BumpEpoch();
  void DropHolds(const GangId& preemptor);
  // Sets a node's state (and drain deadline), recording `source` as who set
  // it, without touching its gangs.
  void MarkNode(int slot, NodeState state, absl::string_view reason,
                std::optional<absl::Time> drain_deadline,
                NodeStateSource source);
  // Replaces the GPUs reported unhealthy on the node at `slot`; pods on
  // newly unhealthy GPUs are repaired or evicted.
  void MarkGpus(int slot, uint64_t unhealthy_mask, absl::string_view reason,
                absl::Time now);
  // Placement options for a gang of `queue`: the fleet's fill rule and the
  // queue's quota gate.
  PlacementOptions OptionsFor(const Queue& queue) const;
  // Slots reserved or held for a preemptor, sorted.
  const std::vector<int>& RestrictedSlots();

  Config config_;
  Fleet fleet_;
  int64_t capacity_epoch_ = 0;  // bumped whenever a pending gang could fit
  VacateCounts vacate_counts_;
  ChangeLog log_;
  GangTable gangs_;
  QuotaBook quotas_;
  RequestKeys requests_;
  ReservationBook reservations_;
  PreemptionBook preemptions_;
  Deadlines deadlines_;
  FitCache fits_;
  Plan plan_;
  // Elastic gangs that hold GPUs (they may grow or shrink), and a count of
  // the stores of any elastic gang.
  absl::btree_set<GangId> elastic_;
  uint64_t elastic_version_ = 0;
  // When growth last found nothing to do: the capacity epoch and elastic
  // version then, and the first time a gang not yet due becomes due.
  // Nothing can grow again until one of them moves.
  struct GrowMemo {
    int64_t epoch = -1;
    uint64_t elastic_version = 0;
    absl::Time next_due = absl::InfinitePast();
  };
  GrowMemo grow_memo_;
  // Gangs that became PENDING since the plan last looked (submitted,
  // requeued): the plan appends them behind its entries.
  std::vector<GangId> plan_arrivals_;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_SCHEDULER_STATE_H_
