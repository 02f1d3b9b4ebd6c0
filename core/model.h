// The domain model of docs/design.md §3 as plain values: nodes, queues, gang
// specs, gangs, events and configuration. No behaviour beyond small helpers;
// the Scheduler owns instances. Values are thread-compatible; a `GangPtr`
// points to an immutable gang that may be shared between snapshots.
#ifndef PHALANX_CORE_MODEL_H_
#define PHALANX_CORE_MODEL_H_

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/ids.h"
#include "core/reason.h"

namespace phalanx::core {

// The implicit last topology level: one host.
inline constexpr char kNodeLevel[] = "node";

enum class TopologyMode { kUnconstrained, kPreferred, kRequired };

struct TopologyConstraint {
  TopologyMode mode = TopologyMode::kUnconstrained;
  std::string level;
  bool operator==(const TopologyConstraint&) const = default;
};

struct SliceSpec {
  int size = 0;  // 0 = no slicing
  std::string level;
  bool operator==(const SliceSpec&) const = default;
};

struct PodSetSpec {
  std::string name;
  int count = 0;
  int gpus = 0;
  int64_t cpu_millis = 0;
  int64_t memory_bytes = 0;
  std::vector<std::string> gpu_models;  // preference order; empty = any
  TopologyConstraint topology;
  SliceSpec slice;
  std::string group;
  // Elastic: the fewest pods the gang may run with (1..count); 0 = fixed
  // at `count` (core/elastic.h).
  int min_count = 0;
  bool operator==(const PodSetSpec&) const = default;
};

struct GangSpec {
  QueueName queue;
  int priority = 0;
  std::map<std::string, std::string> labels;
  std::string request_id;
  absl::Duration estimated_runtime = absl::ZeroDuration();
  absl::Duration max_runtime = absl::ZeroDuration();
  std::vector<PodSetSpec> pod_sets;
  bool allow_mixed_models = false;
  // A named priority of Config::priority_classes; Submit sets `priority`
  // from it.
  std::string priority_class;
  // Once admitted, the gang fails with LEASE_EXPIRED unless its lease is
  // renewed within this (RenewLease); 0 = no lease.
  absl::Duration lease_duration = absl::ZeroDuration();
  bool operator==(const GangSpec&) const = default;

  // Total pods over all pod sets.
  int TotalPods() const;
  // Total GPUs over all pods.
  int64_t TotalGpus() const;
};

enum class GangState {
  kPending,
  kAdmitted,
  kRunning,
  kPreempting,
  kSucceeded,
  kFailed,
  kCancelled,
};

// Returns true for SUCCEEDED, FAILED and CANCELLED.
bool IsFinal(GangState state);
// Returns true for states that hold GPUs (ADMITTED, RUNNING, PREEMPTING).
bool HoldsCapacity(GangState state);
// Returns the state's upper-case name ("PENDING", …).
const char* GangStateName(GangState state);

struct PodPlacement {
  std::string pod_set;
  int index = 0;
  NodeId node;
  std::vector<int> gpu_indices;  // ascending
  bool operator==(const PodPlacement&) const = default;
};

struct Gang {
  GangId id;
  GangSpec spec;
  GangState state = GangState::kPending;
  // Why the gang waits or how it ended: the code clients switch on, and
  // the human detail (core/reason.h).
  ReasonCode reason_code = ReasonCode::kNone;
  std::string reason;
  absl::Time submit_time;
  // The last admission; a requeued gang keeps it until the next one.
  std::optional<absl::Time> admit_time;
  // The first admission, set once; unset while never admitted (and in
  // records stored before it was kept).
  std::optional<absl::Time> first_admit_time;
  std::optional<absl::Time> finish_time;
  // Time held (ADMITTED, RUNNING, PREEMPTING) over the attempts that have
  // ended: each release of its GPUs adds now - admit_time. While the gang
  // holds GPUs the current attempt is not included; once final, all are.
  absl::Duration previous_run_time = absl::ZeroDuration();
  // Pods in pod-set order while held; a final gang keeps its last one with
  // `placement_released` set (it holds nothing).
  std::vector<PodPlacement> placement;
  bool placement_released = false;
  int64_t revision = 0;
  int attempts = 0;  // admissions
  // Times it was requeued as a preemption victim (not counting evictions
  // by failed nodes, or start timeouts).
  int preemptions = 0;
  std::optional<absl::Time> last_checkpoint_time;
  std::string message;
  std::string owner;  // the submitting principal; empty without auth
  // While a leased gang holds GPUs: when its lease lapses unless renewed.
  std::optional<absl::Time> lease_expire_time;
  // While PREEMPTING: when its grace period ends and its GPUs are taken.
  std::optional<absl::Time> grace_deadline;
  // While PREEMPTING for a shrink of an elastic gang: the pods its elastic
  // pod set keeps; 0 = a full preemption.
  int shrink_to = 0;
  // When it last grew or shrank, and how many times it did.
  std::optional<absl::Time> last_resize_time;
  int resizes = 0;
  // The work done in this attempt before the last resize, as run time at
  // full size (core/elastic.h ElasticEnd).
  absl::Duration elastic_work_done = absl::ZeroDuration();
  // This attempt runs on loan (ReservationConfig::preemptible_backfill): it
  // took nodes reserved for another gang past that reservation's start, so
  // a gang holding a reservation on its nodes may preempt it, whatever the
  // priorities and queues.
  bool on_loan = false;
  bool operator==(const Gang&) const = default;
};
using GangPtr = std::shared_ptr<const Gang>;

enum class NodeState { kReady, kCordoned, kDraining, kUnhealthy };
const char* NodeStateName(NodeState state);

// Who last set a node's state: a node agent may undo only its own
// UNHEALTHY, never an operator's decision.
enum class NodeStateSource {
  kOperator,          // UpsertNodes, or SetNodeState by an administrator
  kNodeAgent,         // a node agent's health report or SetNodeState
  kHeartbeatTimeout,  // the scheduler: no heartbeat within the timeout
};
const char* NodeStateSourceName(NodeStateSource source);

// What describes a node's hardware and place; replaced by UpsertNodes.
struct NodeSpec {
  NodeId id;
  std::string gpu_model;
  int gpu_count = 0;
  int64_t cpu_millis = 0;    // 0 = not tracked
  int64_t memory_bytes = 0;  // 0 = not tracked
  std::map<std::string, std::string> labels;
  // Host or IP the gang's ranks use to reach the node; empty = the id.
  std::string address;
  bool operator==(const NodeSpec&) const = default;
};

struct Node {
  NodeSpec spec;
  NodeState state = NodeState::kReady;
  NodeStateSource state_source = NodeStateSource::kOperator;
  std::string state_reason;
  // Bit i = GPU i was reported unhealthy by the node's agent: never placed
  // on; only bits below spec.gpu_count are ever set.
  uint64_t unhealthy_gpu_mask = 0;
  // Why the GPUs in unhealthy_gpu_mask were reported (empty when none).
  std::string unhealthy_gpus_reason;
  // DRAINING only: gangs still on the node then are repaired elsewhere or
  // evicted and requeued. Unset = drain without a deadline.
  std::optional<absl::Time> drain_deadline;
  bool operator==(const Node&) const = default;
};

struct Queue {
  QueueName name;
  QueueName parent;
  double weight = 1.0;
  std::map<std::string, int64_t> nominal_gpus;
  int64_t borrowing_limit_gpus = -1;  // -1 = unlimited
  int64_t lending_limit_gpus = -1;    // -1 = unlimited
  bool held = false;
  // Gangs above this priority are refused (PermissionDenied); unset = any.
  std::optional<int> max_priority;
  bool operator==(const Queue&) const = default;
};

struct RetentionConfig {
  int64_t finished_gangs = 10000;
  absl::Duration finished_gang_age = absl::Hours(168);
  int64_t events = 1000000;
  int64_t audit_records = 100000;
  absl::Duration audit_age = absl::Hours(720);
  bool operator==(const RetentionConfig&) const = default;
};

struct WatchConfig {
  absl::Duration bookmark_interval = absl::Seconds(10);
  int64_t max_lag_events = 100000;
  bool operator==(const WatchConfig&) const = default;
};

// How pending gangs are ordered for admission.
enum class Ordering {
  // Priority (desc), then the queue's fair-share score (asc), then submit
  // time, then id.
  kPriorityFairShareAge,
  // Fair-share score first, then priority, submit time, id.
  kFairShareFirst,
  // Submit time, then id: plain FIFO.
  kSubmitOrder,
};

struct AdmissionConfig {
  Ordering ordering = Ordering::kPriorityFairShareAge;
  // Stop the cycle at the first gang that cannot be admitted (strict FIFO):
  // nothing passes a head that does not fit.
  bool strict_fifo = false;
  // Accept a gang that can never fit the fleet as built: it stays PENDING
  // with reason "NEVER_FITS: …" and is checked again when nodes change.
  // Off: Submit refuses it with FailedPrecondition.
  bool accept_unfit_gangs = false;
  // With kPriorityFairShareAge: gangs of priority below this form one tier
  // ordered as Kueue's Admission Fair Sharing orders a ClusterQueue — the
  // queue's fair-share score first, then priority, submit time, id — behind
  // every gang at or above it (those by priority first, as before). Lowest
  // (the default) = off: every priority is its own tier.
  int fair_share_first_below_priority = std::numeric_limits<int>::lowest();
  // Aging across queues: a queue's head gang ranks as if its priority were
  // higher by floor(hours waited × aging_per_hour), at most
  // aging_max_levels higher. Its own queue's order is unchanged. 0 = off.
  double aging_per_hour = 0;
  int aging_max_levels = 1;
  // Job-size credit in the fair-share order (as Slurm's
  // PriorityWeightJobSize with PriorityFavorSmall=NO): a queue's score is
  // lowered by this × the GPUs its head gang asks for, so a team's big
  // gang is not put behind every small gang of a lighter team. 0 = off.
  double fair_share_size_credit = 0;
  // A bound on being passed over by the fair-share order: a gang that has
  // been pending longer than this since it was submitted ranks ahead of
  // every gang of its tier (its priority, in the default ordering) that
  // has not, and such gangs rank among themselves by submit time, then id
  // — their queues' scores no longer count. So once a gang has waited this
  // long, no gang of its tier submitted after it is offered before it
  // (backfill may still admit a later gang that fits where it does not).
  // > 0; InfiniteDuration = off (the score always counts). Default 6 h:
  // across the simulator's matrix it met the most goals of the bounds
  // tried (bench/results/2026-12-06-sim-fair-order.md).
  absl::Duration fair_share_wait_bound = absl::Hours(6);
  bool operator==(const AdmissionConfig&) const = default;
};

struct PlacementConfig {
  // Lowest nodes in fleet order instead of best fit.
  bool first_fit = false;
  // Scorers among the nodes best fit leaves tied (core/node_score.h): pods
  // go where the gangs already there are expected to end about when they
  // do, so nodes come free together...
  bool end_time_packing = false;
  // ...and onto the node whose leftover GPUs the fewest pods of common
  // sizes could not use (fragmentation gradient).
  bool fragmentation_scoring = false;
  // A gang REQUIRED at one topology level goes to the domain of that level,
  // among those it fits in now, whose last expected end it delays the
  // least (core/domain_score.h), so a rack or block comes free whole
  // sooner; best fit decides among equals. On by default: across the
  // simulator's matrix it met more goal-cells than best fit alone
  // (bench/results/2026-12-01-sim-matrix.md).
  bool domain_end_time_packing = true;
  bool operator==(const PlacementConfig&) const = default;
};

// Admission Fair Sharing (docs/design.md §5).
struct FairShareConfig {
  // Off: every queue scores 0, so ordering is priority, then age.
  bool enabled = true;
  absl::Duration half_life = absl::Hours(168);
  absl::Duration sample_interval = absl::Minutes(5);
  // Weight of each GPU model in the score; unlisted models weigh 1.
  std::map<std::string, double> model_weights;
  // The score counts only the decayed usage U, not the GPUs the queue holds
  // now: a team is not put last the moment its big gang starts, but a
  // burst of one team's gangs in one cycle is no longer held back by the
  // GPUs it has just been given. Off: U + held (docs/design.md §5).
  bool decayed_usage_only = false;
  bool operator==(const FairShareConfig&) const = default;
};

// Reservations with backfill (docs/design.md §4 step 5).
struct ReservationConfig {
  // Most reservations at once; 0 turns reservations off. A reservation
  // holds the exact nodes the placer would give a gang at the head of the
  // line (slices and NVLink groups included) from now until it starts, on
  // top of the plan (PlanningConfig), which protects every planned start
  // by GPU counts per node. Default 3: measured across the simulator's
  // matrix (bench/results/).
  int depth = 3;
  // Gangs of at least this priority may reserve...
  int min_priority = 0;
  // ...and so may any gang that has waited this long (0 = no age rule).
  absl::Duration after = absl::ZeroDuration();
  // How the domain of a reservation is chosen. Off: the earliest expected
  // start (then the fewest GPUs to release). On: the least idle capacity
  // the reservation costs — the gang's GPUs times its wait, plus the
  // GPU-time its held nodes stand idle until it starts (free now, or freed
  // by a gang ending before it) — so a domain that starts a little later
  // but strands nothing beats one that holds many free nodes for hours.
  bool choose_by_stranding = false;
  // Like Slurm's bf_window: a gang whose reservation would start later than
  // this from now reserves nothing (its nodes stay open to everyone, and
  // the reservation slot to the gangs behind it); it reserves once its
  // start comes within the window. 0 = no window.
  absl::Duration window = absl::ZeroDuration();
  // Plan protection. Every few seconds the reservations are planned again
  // from scratch in the cycle's order, so a gang that arrived later with a
  // better place in that order (a higher fair-share rank, the wait bound)
  // may take a reservation's slot. A gang whose reservation went while it
  // stayed pending this many times (for any cause) keeps the next one it
  // makes: a full re-plan re-estimates it on its own domain instead of
  // dropping it, until it starts, leaves PENDING, stops waiting on it (its
  // queue held, a quota refusal, a preemption of its own, no longer allowed
  // to reserve) or its domain can no longer host it. -1 = no
  // protection (every full re-plan starts over); 0 = a reservation, once
  // made, is never taken over.
  int max_takeovers = -1;
  // Whether a gang refused by quota only because its cohort lends too
  // little now (within its own borrowing limit) may reserve like a gang
  // that does not fit, on the capacity projection alone (quota is not
  // projected): the nodes freed for it are then not taken by gangs behind
  // it that end later. Once they are free it starts when quota lets it;
  // a gang that fits the free nodes reserves nothing, so where the cohort's
  // nominal quotas are less than its nodes it may still wait on quota.
  bool for_quota_waits = false;
  // Preemptible backfill. Off: a gang may use nodes reserved for another
  // only if it is expected to end before the reservation starts. On, with
  // preemption enabled: a gang of no higher priority than the holder may
  // also take them past that start, on loan (Gang::on_loan). The holder
  // then preempts it (after preemption.min_runtime, with the grace period)
  // once that is all it still waits for; reservations are planned as if
  // gangs on loan left now. Held nodes run work instead of standing idle,
  // at the cost of the work a preempted borrower loses since its last
  // checkpoint.
  bool preemptible_backfill = false;
  bool operator==(const ReservationConfig&) const = default;
};

// The plan (docs/design.md §4 step 5): an expected start for every pending
// gang in admission order, up to `max_gangs` and within `window`, from an
// availability profile of every node over time. Each gang gets the earliest
// start at which the whole gang fits for its expected run time without
// moving the start of any gang planned before it. With `binding`, no gang
// may start now on capacity the plan gives another gang before this one is
// expected to end (conservative backfill); without, the plan only
// estimates, and the reservations (ReservationConfig) protect the head.
struct PlanningConfig {
  // Most gangs planned; 0 turns the plan off (no estimates, no holds).
  int max_gangs = 500;
  // A gang whose start would lie further than this from now is not planned
  // (it says so); like Slurm's bf_window.
  absl::Duration window = absl::Hours(24 * 7);
  // The plan is made again from scratch at most this often; between, new
  // gangs are appended behind the planned ones and gangs that leave
  // PENDING drop out.
  absl::Duration interval = absl::Seconds(30);
  // How long a gang without estimated_runtime or max_runtime is expected
  // to run, for the plan's profile.
  absl::Duration default_runtime = absl::Hours(24);
  // Whether the plan holds capacity (conservative backfill) or only
  // estimates starts. Off by default: measured in the simulator's matrix
  // (bench/README.md) it is a lever, not yet the default.
  bool binding = false;
  bool operator==(const PlanningConfig&) const = default;
};

// Elastic gangs (core/elastic.h).
struct ElasticConfig {
  // A running elastic gang grows no sooner than this after its admission
  // or its last resize: each resize restarts its ranks from a checkpoint.
  // Default 30 min: across the simulator's elastic matrix it gave more
  // goodput and lost less work than 10 or 120
  // (bench/results/2026-12-07-sim-elastic.md).
  absl::Duration grow_interval = absl::Minutes(30);
  bool operator==(const ElasticConfig&) const = default;
};

// Preemption (docs/design.md §4 step 6).
struct PreemptionConfig {
  // On by default (the simulator's matrix, bench/results/); with
  // min_preemptor_priority, only the higher priority tiers preempt.
  bool enabled = true;
  // Victims are PREEMPTING this long (checkpoint now) unless they
  // acknowledge sooner; their GPUs stay held for the preemptor.
  absl::Duration grace_period = absl::Minutes(5);
  // Gangs admitted less than this long ago are never victims.
  absl::Duration min_runtime = absl::Minutes(10);
  // Caps the work one preemption may throw away: the preemptor's GPUs times
  // how long it would otherwise wait, counted up to this horizon. Long waits
  // are for reservations to end, not for discarding days of a gang's work.
  absl::Duration horizon = absl::Hours(1);
  // Only gangs of at least this priority preempt (within their queue or by
  // reclaiming quota); lowest = every gang may. Default 1: gangs of the
  // default priority 0 wait rather than throw others' work away.
  int min_preemptor_priority = 1;
  // A victim that ran longer than this since its last checkpoint (or its
  // start) is spared: only victims that just checkpointed are cheap enough.
  // 0 = no limit (the horizon alone bounds the loss).
  absl::Duration max_victim_loss = absl::ZeroDuration();
  bool operator==(const PreemptionConfig&) const = default;
};

// Bounds on what clients may send (defaults are safe for a shared daemon).
// The core checks the first group where the config is known (Submit,
// UpsertNodes, PutQueue, Report, Cancel, SetNodeState); the server checks ids
// before anything else and enforces the second group.
struct LimitsConfig {
  // Labels per gang or node.
  int max_labels = 32;
  // A label key: 1..this many bytes of [A-Za-z0-9._/-].
  int max_label_key_bytes = 63;
  // A label value: at most this many bytes.
  int max_label_value_bytes = 256;
  // Gang, node and request ids: 1..this many bytes of printable ASCII.
  int max_id_bytes = 128;
  // Reasons and messages (CancelGang, ReportGang, SetNodeState).
  int max_message_bytes = 1024;
  // A queue's nominal quota, borrowing and lending limits, per GPU model.
  int64_t max_quota_gpus = int64_t{1} << 40;
  // A submit to a queue with this many PENDING gangs is RESOURCE_EXHAUSTED.
  int64_t max_pending_gangs_per_queue = 100000;
  // Enforced by the server: per-principal token bucket...
  double requests_per_second = 1000;
  int64_t request_burst = 2000;
  // ...open WatchGangs streams per principal...
  int watch_streams_per_principal = 64;
  // ...and bytes queued for one watch stream and for all of them.
  int64_t watch_stream_buffer_bytes = int64_t{4} << 20;
  int64_t watch_total_buffer_bytes = int64_t{256} << 20;
  bool operator==(const LimitsConfig&) const = default;
};

struct Config {
  std::vector<std::string> topology_levels;
  AdmissionConfig admission;
  ReservationConfig reservation;
  PlanningConfig planning;
  ElasticConfig elastic;
  PreemptionConfig preemption;
  PlacementConfig placement;
  FairShareConfig fair_share;
  absl::Duration cycle_interval = absl::Seconds(1);
  RetentionConfig retention;
  WatchConfig watch;
  absl::Duration idempotency_retention = absl::Hours(24);
  absl::Duration heartbeat_timeout = absl::ZeroDuration();  // 0 = off
  absl::Duration startup_grace = absl::Minutes(5);
  // An ADMITTED gang not reported RUNNING within this is requeued; 0 = off.
  absl::Duration start_timeout = absl::ZeroDuration();
  // Named priorities (GangSpec::priority_class).
  std::map<std::string, int> priority_classes;
  LimitsConfig limits;
  int64_t version = 0;
  bool operator==(const Config&) const = default;
};

enum class EventType {
  kSubmitted,
  kAdmitted,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kRequeued,
  kPreempting,
  kEvicted,
  kRepaired,
  kReserved,
  kBookmark,
  // A checkpoint report that changed nothing else.
  kCheckpointed,
  // An elastic gang grew or finished a shrink: a new placement.
  kResized,
};
const char* EventTypeName(EventType type);

struct Event {
  int64_t revision = 0;
  EventType type = EventType::kBookmark;
  absl::Time time;
  GangPtr gang;  // the gang after the event; null for a bookmark
};

// An idempotency key: (queue, request_id) -> the gang its first submit made.
struct RequestRecord {
  QueueName queue;
  std::string request_id;
  GangId gang_id;
  uint64_t spec_fingerprint = 0;
  absl::Time expires;
};

// Decayed fair-share usage of one queue (docs/design.md §5).
struct LedgerEntry {
  std::map<std::string, double> usage;  // by GPU model
  absl::Time updated;
  bool operator==(const LedgerEntry&) const = default;
};

// Counters persisted beside the state.
struct Meta {
  int64_t last_revision = 0;
  int64_t next_gang_seq = 1;
  int64_t first_retained_revision = 1;
  bool operator==(const Meta&) const = default;
};

// Returns a fingerprint of `spec` that is stable across processes and
// versions of this binary (FNV-1a over a canonical encoding).
uint64_t SpecFingerprint(const GangSpec& spec);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_MODEL_H_
