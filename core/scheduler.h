// Scheduler: the whole scheduling state and its commands, as pure logic
// (docs/design.md §3–§4). Commands validate, change state and record what
// changed; RunCycle admits pending gangs all or nothing; TakeMutation hands the
// changes to the caller to persist. Time is always an argument.
//
// Owned by one thread (the scheduler loop in the daemon, the simulator's main
// loop); not thread-safe.
#ifndef PHALANX_CORE_SCHEDULER_H_
#define PHALANX_CORE_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/fair_share.h"
#include "core/fleet.h"
#include "core/lease_table.h"
#include "core/model.h"
#include "core/pending_index.h"
#include "core/placement.h"
#include "core/reservation.h"
#include "core/state_store.h"

namespace phalanx::core {

// The reason of a gang no admission cycle has looked at yet.
inline constexpr char kWaitingReason[] = "WAITING: in line for admission";
// The reason of a gang a cycle stopped before reaching because no GPU was
// free (and neither preemption nor a new reservation could change that).
inline constexpr char kNoFreeGpuReason[] =
    "NO_FIT: no GPU is free in the fleet; tried again when capacity changes";
// Prefix of the reason of a gang accepted with admission.accept_unfit_gangs
// that can never fit the fleet as built.
inline constexpr char kNeverFitsPrefix[] = "NEVER_FITS: ";

struct SubmitResult {
  GangPtr gang;
  bool created = false;  // false: an earlier submit with the same request_id
};

// A launcher's report (ReportGang).
struct GangReport {
  GangId gang_id;
  std::optional<GangState> state;  // RUNNING, SUCCEEDED or FAILED
  std::optional<absl::Time> last_checkpoint_time;
  bool preemption_acknowledged = false;
  std::string message;
};

struct Explanation {
  GangPtr gang;
  std::string reason;
  int position = 0;           // among all pending gangs, 1-based; 0 = n/a
  int position_in_queue = 0;  // among its queue's pending gangs
  std::optional<Reservation> reservation;  // when the gang holds one
};

// Live figures of a queue.
struct QueueUsage {
  std::map<std::string, int64_t> held_gpus;  // by GPU model
  int pending = 0;
  int active = 0;
};

class Scheduler {
 public:
  explicit Scheduler(Config config = {});

  // Rebuilds a scheduler from persisted state: free capacity from placements.
  // Fails with FailedPrecondition, naming what is wrong, when an invariant is
  // broken (a GPU held twice, a gang partly placed, a missing node or queue).
  static absl::StatusOr<std::unique_ptr<Scheduler>> Restore(LoadedState state,
                                                            absl::Time now);

  // --- Commands: each either changes state and returns OK, or changes
  // nothing. ---

  // Accepts `spec` as a PENDING gang. NotFound for an unknown queue;
  // InvalidArgument naming a bad field; FailedPrecondition when it can never
  // fit the fleet; AlreadyExists for a reused request_id with another spec;
  // PermissionDenied when its priority is above the queue's max_priority.
  // `owner` (the submitting principal) is recorded on a new gang.
  absl::StatusOr<SubmitResult> Submit(GangSpec spec, absl::Time now,
                                      std::string owner = {});
  // Cancels a non-final gang (a final gang is returned unchanged).
  absl::StatusOr<GangPtr> Cancel(const GangId& id, absl::string_view reason,
                                 absl::Time now);
  // Applies a launcher's report; FailedPrecondition for a transition the
  // lifecycle does not allow. A checkpoint that changes nothing else is an
  // event (CHECKPOINTED); a repeated identical report is not.
  absl::StatusOr<GangPtr> Report(const GangReport& report, absl::Time now);
  // Renews a leased gang's lease to now + its lease_duration. No event and
  // no revision: only the gang's lease_expire_time moves (it is written).
  // NotFound for an unknown gang; FailedPrecondition when it has no lease
  // or holds no GPUs (pending: its lease starts at admission; final).
  absl::StatusOr<GangPtr> RenewLease(const GangId& id, absl::Time now);
  // What UpsertNodes does with the state of a node that already exists.
  enum class ExistingNodeState {
    kKeep,    // ignore the given state (the --fleet file at start-up)
    kRefuse,  // InvalidArgument when it differs (the UpsertNodes RPC)
  };
  // Adds or updates nodes, all or none. New nodes get the state they carry;
  // existing nodes keep theirs (or, with kRefuse, a different state fails
  // with InvalidArgument pointing at SetNodeState). New nodes count as
  // heard from at `now` (when given).
  absl::StatusOr<std::vector<Node>> UpsertNodes(
      std::vector<Node> nodes, absl::Time now = absl::InfinitePast(),
      ExistingNodeState existing = ExistingNodeState::kKeep);
  // Changes a node's state. UNHEALTHY repairs its gangs (moves only their
  // pods on the node, keeping every topology constraint; event REPAIRED)
  // or evicts and requeues them (event EVICTED). A `drain_deadline` is for
  // DRAINING only (InvalidArgument otherwise): gangs still on the node at
  // that time are repaired or evicted alike. Any other state clears it.
  absl::StatusOr<Node> SetNodeState(
      const NodeId& id, NodeState state, absl::string_view reason,
      absl::Time now, std::optional<absl::Time> drain_deadline = std::nullopt);
  // Removes a node that holds no gang.
  absl::Status RemoveNode(const NodeId& id);
  // Records heartbeats (kept in memory only).
  absl::Status Heartbeat(const std::vector<NodeId>& ids, absl::Time now);
  // Creates or replaces a queue.
  absl::StatusOr<Queue> PutQueue(Queue queue);
  // Deletes a queue without non-final gangs or children.
  absl::Status DeleteQueue(const QueueName& name);
  // Replaces the configuration; Aborted when `expected_version` is stale.
  absl::StatusOr<Config> UpdateConfig(Config config,
                                      std::optional<int64_t> expected_version);

  // Runs one admission cycle (and housekeeping: expiry and retention).
  void RunCycle(absl::Time now);
  // Returns everything changed since the last call and forgets it.
  Mutation TakeMutation();

  // --- Reads. ---
  GangPtr FindGang(const GangId& id) const;
  const absl::flat_hash_map<GangId, GangPtr>& gangs() const { return gangs_; }
  const Config& config() const { return config_; }
  const Fleet& fleet() const { return fleet_; }
  // The pending gangs by group (for tests and benchmarks).
  const PendingIndex& pending() const { return pending_; }
  std::optional<absl::Time> LastHeartbeat(const NodeId& id) const;
  const absl::btree_map<QueueName, Queue>& queues() const { return queues_; }
  QueueUsage Usage(const QueueName& name) const;
  int64_t revision() const { return revision_; }
  // Why a gang waits and where it stands. NotFound for an unknown gang.
  absl::StatusOr<Explanation> Explain(const GangId& id) const;
  // Where `spec` would go now; nothing changes. Errors as Submit.
  absl::StatusOr<PlacementResult> DryRun(GangSpec spec);
  // GPUs the queue holds above its nominal quota, over all models.
  int64_t BorrowedGpus(const QueueName& name) const;
  // The queue's fair-share score now (lower goes first).
  FairShareScore Score(const QueueName& name) const;
  const FairShareLedger& ledger() const { return ledger_; }
  // Reservations made by the last cycle, in order.
  const std::vector<Reservation>& reservations() const { return reservations_; }
  // Preemptor -> the nodes held for it while its victims stop.
  const std::map<GangId, std::set<NodeId>>& held_for() const {
    return held_for_;
  }
  // Bumped whenever a pending gang could newly fit (docs/design.md §4 speed
  // rules).
  int64_t capacity_epoch() const { return capacity_epoch_; }
  // Gangs moved off failed or drained nodes since this process started, by
  // (outcome: "repaired" | "evicted", cause: "unhealthy" | "drain_deadline");
  // for metrics.
  using VacateCounts = std::map<std::pair<std::string, std::string>, int64_t>;
  const VacateCounts& vacate_counts() const { return vacate_counts_; }
  // Gangs per (queue, state), for metrics.
  const std::map<std::pair<QueueName, GangState>, int64_t>& gang_counts()
      const {
    return gang_counts_;
  }

 private:
  // Orders queue heads in the cycle (admission.cc).
  struct HeadKey;
  class CycleOrder;

  // Checks a valid spec against the scheduler: its queue exists, its levels
  // exist, and it could fit the fleet with every GPU free.
  absl::Status CheckSubmittable(const GangSpec& spec) const;
  // Sets spec.priority from spec.priority_class; InvalidArgument for an
  // unknown class or a priority that contradicts it.
  absl::Status ResolvePriorityClass(GangSpec& spec) const;
  // PermissionDenied when spec.priority is above its queue's max_priority.
  absl::Status CheckMaxPriority(const GangSpec& spec) const;
  GangPtr Put(Gang gang);
  GangPtr Transition(Gang gang, EventType type, absl::Time now);
  void Charge(const Gang& gang, int sign);
  void ReleaseCapacity(Gang& gang, absl::Time now);
  void Admit(const GangPtr& gang, std::vector<PodPlacement> pods,
             absl::Time now);
  void SetReason(const GangPtr& gang, std::string reason);
  void ExpireAndTrim(absl::Time now);
  // Whether the request key of `gang` is live and names it.
  bool RequestKeyLive(const Gang& gang) const;
  // Forgets a final gang (retention).
  void DeleteGang(const GangId& id);
  void BumpEpoch() {
    ++capacity_epoch_;
    ForgetHeldSlots();  // slots may have moved
  }
  void ForgetHeldSlots() {
    held_slots_.clear();
    restricted_slots_.reset();
  }
  // Slots that some gang may not use (reserved, or held for a preemptor),
  // sorted: the only ones a placement's node filter needs to ask about.
  const std::vector<int>& RestrictedSlots() const;
  // Checks that the topology and slice levels of `set` exist in the fleet
  // and that slices are no wider than the topology constraint.
  absl::Status CheckLevels(const PodSetSpec& set,
                           absl::string_view field) const;
  // Why `spec` could never fit the fleet as it is built, or "" if it could.
  const std::string& NeverFitsReason(const GangSpec& spec) const;
  // With admission.accept_unfit_gangs, the "NEVER_FITS: …" reason of a spec
  // that can never fit; else, or when it could fit, "".
  std::string NeverFitsPending(const GangSpec& spec) const;
  const HeldGpus& Held(const QueueName& queue) const;

  // preemption.cc
  // Picks the cheapest sufficient set of victims for `gang` and moves them
  // to PREEMPTING; returns the gang's pending reason, or nullopt.
  std::optional<std::string> TryPreempt(const GangPtr& gang, absl::Time now);
  // GPU-seconds of work a preemption for `gang` may throw away: its GPUs
  // times how long it would wait for capacity to free up on its own (by the
  // running gangs' estimates; unknown counts as long), capped at
  // preemption.horizon; none when it is due within the grace period.
  // Whether the gang fits the fleet now (reservations and holds aside),
  // else when it could start once running gangs end (nullopt: never).
  struct NaturalStart {
    bool fits_now = false;
    std::optional<absl::Time> start;
  };
  NaturalStart WhenItFits(const Gang& gang, absl::Time now) const;
  double PreemptionBudget(const Gang& gang, absl::Time now) const;
  // Which gangs a preemptor may take capacity from: its own queue's lower
  // priorities, and sibling queues above nominal when it reclaims.
  struct VictimRules {
    QueueName queue;
    int priority = 0;
    std::set<QueueName> reclaim_from;
  };
  VictimRules VictimRulesFor(const Gang& preemptor) const;
  // Whether `victim` is of a kind the rules allow (the min-runtime guard
  // aside).
  static bool IsVictim(const Gang& victim, const VictimRules& rules);
  // Whether `gang` fits once `victims` are gone (tentatively released).
  bool FitsWithout(const GangPtr& gang, const std::vector<GangPtr>& victims);
  void SetAside(const Gang& victim);   // its capacity freed, tentatively
  void PutBack(const Gang& victim);    // undoes SetAside
  bool FitsAsIs(const GangPtr& gang);  // holds for others respected
  std::string PreemptedReason(const GangId& victim) const;
  // Ends a victim's preemption: releases it and requeues it.
  void FinishPreemption(Gang victim, absl::Time now);
  // Whether the node at `slot` is held for a preemptor other than `gang`.
  bool HeldForOther(int slot, const GangId& gang) const;
  // The node order of the configured placement scorers for `gang`'s
  // unconstrained pods (core/node_score.h); empty when none is on.
  std::function<NodeRank(int, int)> NodeRanker(const Gang& gang,
                                               absl::Time now) const;
  // With placement.domain_end_time_packing: moves the placement of a gang
  // REQUIRED at one level into the domain of that level it fits in that
  // ranks best by core/domain_score.h (best fit's own when that ties).
  void PackByDomainEnd(const Gang& gang, const PlacementOptions& options,
                       PlacementResult& placement, absl::Time now);
  // The latest expected end of the gangs with pods in `domain`
  // (InfinitePast when none).
  absl::Time LatestEndIn(int domain, absl::Time now) const;
  // The stored gang `id`, or null; valid until gangs_ changes (a lookup
  // for hot loops that only read, with no reference count to move).
  const Gang* PeekGang(const GangId& id) const;
  // Forgets the nodes held for `preemptor`.
  void DropHolds(const GangId& preemptor);

  // timers.cc
  // Fails gangs past max_runtime, requeues gangs past start_timeout, and
  // marks nodes without a recent heartbeat UNHEALTHY.
  void ExpireTimers(absl::Time now);
  void CheckHeartbeats(absl::Time now);
  // Fails the gangs whose lease has lapsed (reason LEASE_EXPIRED).
  void ExpireLeases(absl::Time now);
  void ArmTimers(const Gang& gang);

  // node_failure.cc (docs/design.md §6 "Node failure")
  enum class VacateCause { kUnhealthy, kDrainDeadline };
  // Moves every gang off the nodes at `slots` (and any UNHEALTHY node),
  // highest priority first: repaired in place when its constraints allow,
  // else evicted and requeued in its old place. PREEMPTING victims are
  // always requeued: they stop within their grace period anyway.
  void VacateNodes(const std::vector<int>& slots, VacateCause cause,
                   absl::Time now);
  // Moves the pods of `gang` on slots where `vacate` is set (event
  // REPAIRED). FailedPrecondition saying why, and no change, when its
  // constraints cannot be kept.
  absl::Status TryRepair(const GangPtr& gang, const std::vector<char>& vacate,
                         absl::Time now);
  // Slots a repair of `gang` may use: not held for another preemptor, not
  // reserved for a gang it is not expected to end before.
  std::vector<char> RepairTargets(const Gang& gang, absl::Time now) const;
  // Quota for a repair: moving GPUs within a model costs nothing; only
  // growth of a model beyond what `moved` frees needs quota.
  ModelGate RepairQuotaGate(const Gang& gang,
                            const std::vector<PodPlacement>& moved) const;
  // Sets a node's state (and drain deadline) without touching its gangs.
  void MarkNode(int slot, NodeState state, absl::string_view reason,
                std::optional<absl::Time> drain_deadline);
  // Moves gangs off DRAINING nodes whose deadline has come.
  void ExpireDrains(absl::Time now);

  // admission.cc
  int64_t FreeReadyGpus() const;
  // Admits preemptors whose victims have stopped onto the capacity held for
  // them; drops the holds of those that still do not fit.
  void AdmitPreemptors(absl::Time now);
  // Tries to admit one gang; returns the reason it stays pending, or "".
  struct Attempt {
    std::string reason;             // "" when admitted
    bool backfill_matters = false;  // it would fit on nodes reserved for
                                    // others it may not backfill into
  };
  Attempt TryAdmit(const GangPtr& gang, absl::Time now);
  // "" if `queue` may take `gpus` more GPUs of `model`, else why not.
  std::string QuotaReason(const Queue& queue, const std::string& model,
                          int64_t gpus) const;
  PlacementOptions OptionsFor(const Queue& queue) const;
  // Whether `gang` may use a node reserved by `reservation` (backfill).
  bool MayBackfill(const Gang& gang, const Reservation& reservation,
                   absl::Time now) const;
  bool MayReserve(int priority, absl::Time submit_time, absl::Time now) const;
  // The reservation `id` holds, or null.
  const Reservation* ReservationOf(const GangId& id) const;
  // Whether a pending gang known to fail must still be offered to the cycle,
  // to make a reservation; null in strict FIFO (every failure blocks).
  std::function<bool(const PendingKey&)> CouldReserveNow(absl::Time now);
  // Gives gangs that joined a group known to fail the group's reason.
  void SettleJoinedGangs();
  // Gives every pending gang of a group the cycle did not reach `reason`.
  void StampUnreached(const std::string& reason);
  // Whether `gang`, or a gang after it in this cycle's order, may preempt.
  bool MayPreemptFrom(const Gang& gang) const;
  // Pending gangs that held one of `previous` and hold none now drop the
  // "RESERVED: …" part of their reason.
  void ClearLostReservations(const std::vector<Reservation>& previous);
  // The reservation `gang` holds, or a new one if it may reserve; returns
  // the reason prefix it then has.
  std::optional<std::string> ReserveFor(const GangPtr& gang, absl::Time now);
  std::string ReservedReason(const Reservation& reservation) const;
  // The slots of the nodes `reservation` holds (those still in the fleet).
  std::vector<int> ReservedSlots(const Reservation& reservation) const;
  // Reserves a domain for `gang`; returns the pending reason it then has.
  // Nothing is reserved when the start lies beyond reservation.window.
  std::optional<std::string> Reserve(const GangPtr& gang, absl::Time now);
  // Whether `reservation` starts within reservation.window of `now`.
  bool WithinWindow(const Reservation& reservation, absl::Time now) const;
  // Why a gang that failed with reservations in force waits, if the
  // reservations are the cause.
  std::optional<std::string> BlockedByReservation(const GangPtr& gang,
                                                  const Queue& queue);
  // Emits RESERVED events for new reservations; bumps the epoch on change.
  void AnnounceReservations(const std::vector<Reservation>& previous,
                            absl::Time now);
  // When capacity changed: re-plans every reservation (at most every few
  // seconds), else re-estimates the kept ones on their domains and drops
  // those whose gang left PENDING or no longer fits there.
  void KeepOrReplanReservations(absl::Time now);
  void SampleLedger(absl::Time now);
  // Pending gangs in the order a cycle would consider them now.
  std::vector<GangPtr> StaticOrder() const;

  Config config_;
  Fleet fleet_;
  absl::btree_map<QueueName, Queue> queues_;
  absl::flat_hash_map<GangId, GangPtr> gangs_;
  PendingIndex pending_;
  absl::btree_set<GangId> active_;  // gangs holding capacity
  // The gangs of active_ by queue and priority, each in order of admission
  // (then id; no admit time sorts last): a queue's preemption candidates
  // of each priority, the longest-running first, so TryPreempt stops at
  // the first one min_runtime still guards.
  using AdmissionOrder = absl::btree_set<std::pair<absl::Time, GangId>>;
  absl::flat_hash_map<QueueName, std::map<int, AdmissionOrder>>
      active_by_queue_;
  // Admit time + estimated runtime of each gang in active_
  // (InfiniteFuture without an estimate): the earliest is a bound on when
  // capacity can free up, for reservation plans.
  std::multiset<absl::Time> active_ends_;
  FairShareLedger ledger_;
  absl::Time last_ledger_sample_ = absl::InfinitePast();
  int64_t capacity_epoch_ = 0;
  // The epoch the reservations were planned at: they are re-planned when
  // it moves, and kept while nothing changes.
  int64_t reservations_epoch_ = -1;
  // When the reservations were last planned from scratch.
  absl::Time reservations_planned_at_ = absl::InfinitePast();
  // Whether kept reservations were re-estimated since that plan (a full
  // plan then follows once the interval has passed, changes or not).
  bool reservations_refreshed_ = false;
  // When time alone may let a pending gang in (a preemption victim passing
  // its min-runtime guard): the epoch moves then.
  absl::Time wakeup_ = absl::InfiniteFuture();
  std::vector<Reservation> reservations_;
  std::vector<int> reserved_slot_;  // fleet slot -> index in reservations_
  std::set<std::pair<absl::Time, GangId>> finished_;
  // Final gangs retention let go that stay while their request key is live
  // (out of finished_, so they do not count against retention).
  absl::btree_set<GangId> tombstones_;
  absl::flat_hash_map<QueueName, QueueUsage> usage_;
  std::map<std::pair<QueueName, GangState>, int64_t> gang_counts_;
  absl::btree_map<std::pair<QueueName, std::string>, RequestRecord> requests_;
  std::set<std::pair<absl::Time, std::pair<QueueName, std::string>>>
      request_expiry_;
  absl::flat_hash_map<NodeId, absl::Time> heartbeats_;
  // (when, node): drain deadlines, checked lazily against the node.
  std::set<std::pair<absl::Time, NodeId>> drain_timers_;
  VacateCounts vacate_counts_;
  // (when, gang): max_runtime and start_timeout deadlines, checked lazily.
  std::set<std::pair<absl::Time, GangId>> timers_;
  // Leased gangs holding GPUs, kept in step with Gang::lease_expire_time by
  // Put.
  LeaseTable leases_;
  // Victim -> its preemptor (may be empty after a restart) and the end of
  // its grace period; preemptor -> nodes held for it.
  struct Preemption {
    GangId preemptor;
    absl::Time deadline;
  };
  std::map<GangId, Preemption> preemptor_of_;
  std::map<GangId, std::set<NodeId>> held_for_;
  // held_for_ by fleet slot, rebuilt on demand (empty: stale).
  mutable std::vector<std::vector<GangId>> held_slots_;
  // Reserved or held slots, sorted, rebuilt on demand (nullopt: stale).
  mutable std::optional<std::vector<int>> restricted_slots_;
  // "Can it ever fit the fleet" by placement shape ("" = yes, else why
  // not), valid for one fleet structure version.
  mutable absl::flat_hash_map<std::string, std::string> ever_fits_;
  mutable uint64_t ever_fits_version_ = 0;
  // The fleet with every node READY and idle, for the joint "can it ever
  // fit" search; rebuilt when the fleet's structure version moves.
  // WhenItFits by placement shape, for one fleet version, time and
  // earliest expected end (any change of them starts it afresh).
  struct BudgetMemo {
    uint64_t fleet_version = 0;
    absl::Time now = absl::InfinitePast();
    absl::Time earliest_end = absl::InfinitePast();
    absl::flat_hash_map<std::string, NaturalStart> starts;
  };
  mutable BudgetMemo budget_memo_;
  mutable std::unique_ptr<Fleet> idle_twin_;
  mutable uint64_t idle_twin_version_ = 0;
  std::optional<absl::Time> started_at_;
  int64_t revision_ = 0;
  int64_t next_gang_seq_ = 1;
  int64_t first_retained_revision_ = 1;

  // What changed since the last TakeMutation.
  // Gangs changed since the last TakeMutation, with their current records
  // (every write to gangs_ writes here too), so taking them looks nothing up.
  absl::btree_map<GangId, GangPtr> dirty_gangs_;
  absl::btree_set<GangId> deleted_gangs_;
  absl::btree_set<NodeId> dirty_nodes_;
  absl::btree_set<NodeId> deleted_nodes_;
  absl::btree_set<QueueName> dirty_queues_;
  absl::btree_set<QueueName> deleted_queues_;
  bool dirty_config_ = false;
  std::vector<RequestRecord> requests_put_;
  std::vector<std::pair<QueueName, std::string>> requests_deleted_;
  std::vector<QueueName> ledger_deleted_;
  std::vector<Event> events_;
  int64_t trim_events_before_ = 0;
  bool dirty_meta_ = false;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_SCHEDULER_H_
