// Scheduler: the scheduling state and its commands, as pure logic
// (docs/design.md §3–§4). A front over the owners of that state
// (scheduler_state.h: the gang table, the change log, the quota book,
// request keys, reservations, preemptions, deadlines and fit caches), each
// the only writer of its own.
// Commands validate, change state through the owners and record what
// changed; RunCycle admits pending gangs all or nothing (admission_cycle.h);
// TakeMutation hands the changes to the caller to persist. Time is always an
// argument.
//
// Owned by one thread (the scheduler loop in the daemon, the simulator's main
// loop); not thread-safe.
#ifndef PHALANX_CORE_SCHEDULER_H_
#define PHALANX_CORE_SCHEDULER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/fleet.h"
#include "core/gang_table.h"
#include "core/model.h"
#include "core/placement.h"
#include "core/reservation.h"
#include "core/scheduler_state.h"
#include "core/scheduler_types.h"
#include "core/state_store.h"

namespace phalanx::core {

class Scheduler : private SchedulerState {
 public:
  explicit Scheduler(Config config = {}) : SchedulerState(std::move(config)) {}

  // Rebuilds a scheduler from persisted state: free capacity from placements.
  // Fails with FailedPrecondition, naming what is wrong, when an invariant is
  // broken (a GPU held twice, a gang partly placed, a missing node or queue).
  static absl::StatusOr<std::unique_ptr<Scheduler>> Restore(LoadedState state,
                                                            absl::Time now);

  // --- Commands: each changes state and returns OK, or changes nothing;
  // errors name the field (full contracts in scheduler_commands.cc).
  // A new PENDING gang (or the one an earlier submit with the same
  // request_id made). NotFound queue; InvalidArgument spec; FailedPrecondition
  // never fits; AlreadyExists reused request_id; PermissionDenied priority;
  // ResourceExhausted pending limit.
  absl::StatusOr<SubmitResult> Submit(GangSpec spec, absl::Time now,
                                      std::string owner = {});
  // CANCELLED (a final gang unchanged). NotFound.
  absl::StatusOr<GangPtr> Cancel(const GangId& id, absl::string_view reason,
                                 absl::Time now);
  // A launcher's report; FailedPrecondition for a transition not allowed.
  absl::StatusOr<GangPtr> Report(const GangReport& report, absl::Time now);
  // The lease to now + lease_duration, no event. FailedPrecondition unless
  // leased and holding GPUs.
  absl::StatusOr<GangPtr> RenewLease(const GangId& id, absl::Time now);
  using ExistingNodeState = core::ExistingNodeState;
  // Adds or updates nodes, all or none.
  absl::StatusOr<std::vector<Node>> UpsertNodes(
      std::vector<Node> nodes, absl::Time now = absl::InfinitePast(),
      ExistingNodeState existing = ExistingNodeState::kKeep);
  // UNHEALTHY repairs or evicts the node's gangs; DRAINING may take a
  // deadline by which they are.
  // `source` is recorded as who set the state.
  absl::StatusOr<Node> SetNodeState(
      const NodeId& id, NodeState state, absl::string_view reason,
      absl::Time now, std::optional<absl::Time> drain_deadline = std::nullopt,
      NodeStateSource source = NodeStateSource::kOperator);
  // A node agent's health check: sets the node's unhealthy GPUs (pods on
  // newly unhealthy ones are repaired or evicted), a failed READY node
  // UNHEALTHY and a passing node READY when a node agent made it UNHEALTHY;
  // never changes a cordon, a drain or another's UNHEALTHY. NotFound node;
  // InvalidArgument GPU index or reason.
  absl::StatusOr<Node> ReportNodeHealth(const NodeHealthReport& report,
                                        absl::Time now);
  absl::Status RemoveNode(const NodeId& id);  // one that holds no gang
  // Records that nodes are alive; a node UNHEALTHY for want of heartbeats
  // is READY again.
  absl::Status Heartbeat(const std::vector<NodeId>& ids, absl::Time now);
  absl::StatusOr<Queue> PutQueue(Queue queue);  // creates or replaces
  // A queue without non-final gangs or children.
  absl::Status DeleteQueue(const QueueName& name);
  // Aborted when `expected_version` is stale.
  absl::StatusOr<Config> UpdateConfig(Config config,
                                      std::optional<int64_t> expected_version);

  // Runs one admission cycle, after housekeeping (expiry, retention, timers,
  // leases, heartbeats, drains).
  void RunCycle(absl::Time now);
  // Brings the plan up to date when it is due (core/planner.h): before
  // reading PlanOf. A binding plan is kept by RunCycle itself; a plan that
  // only estimates costs nothing until read.
  void UpdatePlan(absl::Time now);
  // Returns everything changed since the last call and forgets it.
  Mutation TakeMutation();

  // --- Reads.
  GangPtr FindGang(const GangId& id) const { return gangs_.Find(id); }
  // Every stored gang, as (id, record) pairs.
  GangTable::Records gangs() const;
  const Config& config() const { return config_; }
  const Fleet& fleet() const { return fleet_; }
  // The gangs with pods on fleet slot `slot`, by id.
  std::vector<GangPtr> GangsOn(int slot) const;
  // The gang with handle `handle` (Fleet::Slot::gang_pods), or null.
  const Gang* GangAt(GangHandle handle) const { return gangs_.Peek(handle); }
  const PendingIndex& pending() const { return gangs_.pending(); }
  std::optional<absl::Time> LastHeartbeat(const NodeId& id) const;
  const absl::btree_map<QueueName, Queue>& queues() const;
  QueueUsage Usage(const QueueName& name) const;
  int64_t revision() const { return log_.revision(); }
  // Why a gang waits and where it stands in the order a cycle at `now`
  // would take (the wait bound and aging count from `now`; left out when
  // `now` is InfinitePast). NotFound for an unknown gang.
  absl::StatusOr<Explanation> Explain(
      const GangId& id, absl::Time now = absl::InfinitePast()) const;
  // Where `spec` would go now; nothing changes. Errors as Submit.
  absl::StatusOr<PlacementResult> DryRun(GangSpec spec);
  // Held GPUs, borrowing, fair-share scores and the usage ledger.
  const QuotaBook& quotas() const { return quotas_; }
  const std::vector<Reservation>& reservations() const;
  // `id`'s place in the plan: its planned start and domain, or why it has
  // none (core/plan.h).
  PlannedStart PlanOf(const GangId& id) const;
  const Plan& plan() const { return plan_; }
  const std::map<GangId, std::set<NodeId>>& held_for() const;
  int64_t capacity_epoch() const { return capacity_epoch_; }
  // Gangs moved off failed or drained nodes since this process started.
  using VacateCounts = SchedulerState::VacateCounts;
  const VacateCounts& vacate_counts() const { return vacate_counts_; }
  const GangTable::Counts& gang_counts() const { return gangs_.counts(); }
};

// Puts `queues` into `scheduler` in any order, parents before children: a
// queue whose parent is not there yet is retried after the others, until a
// pass puts nothing. A queue equal to the one held is skipped. Fails with
// the first refusal, prefixed `queue "NAME": `, or NotFound when some
// parent is never given.
absl::Status PutQueuesParentsFirst(Scheduler& scheduler,
                                   std::vector<Queue> queues);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_SCHEDULER_H_
