#include "core/scheduler.h"

#include <algorithm>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "core/check.h"
#include "core/status_macros.h"
#include "core/validate.h"

namespace phalanx::core {

bool Mutation::empty() const {
  return gangs_put.empty() && gangs_deleted.empty() && nodes_put.empty() &&
         ledger_put.empty() && ledger_deleted.empty() &&
         nodes_deleted.empty() && queues_put.empty() &&
         queues_deleted.empty() && !config.has_value() &&
         requests_put.empty() && requests_deleted.empty() && events.empty() &&
         trim_events_before == 0 && audit_put.empty() && trim_audit_before == 0;
}

namespace {
// When a gang holding capacity is expected to end, unclamped:
// InfiniteFuture without an estimate (ExpectedEnd clamps it to now).
absl::Time RunningUntil(const Gang& gang) {
  if (gang.spec.estimated_runtime <= absl::ZeroDuration() || !gang.admit_time) {
    return absl::InfiniteFuture();
  }
  return *gang.admit_time + gang.spec.estimated_runtime;
}

absl::Time FinishTime(const Gang& gang) {
  return gang.finish_time.value_or(gang.submit_time);
}

std::string FormatTimeForError(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", time, absl::UTCTimeZone());
}

// A checkpoint is one the gang's current run made: it holds GPUs, and the
// checkpoint lies between its admission and now. Preemption ranks victims
// by the work lost since their checkpoint, so a checkpoint in the future
// would make a gang look free to preempt, or never worth it.
absl::Status CheckCheckpoint(const Gang& gang, absl::Time checkpoint,
                             absl::Time now) {
  if (!HoldsCapacity(gang.state) || !gang.admit_time) {
    return absl::InvalidArgumentError(absl::StrCat(
        "last_checkpoint_time: gang ", gang.id.value(), " is ",
        GangStateName(gang.state),
        "; only an ADMITTED, RUNNING or PREEMPTING gang checkpoints"));
  }
  if (checkpoint > now) {
    return absl::InvalidArgumentError(
        absl::StrCat("last_checkpoint_time: ", FormatTimeForError(checkpoint),
                     " is in the future (now ", FormatTimeForError(now), ")"));
  }
  if (checkpoint < *gang.admit_time) {
    return absl::InvalidArgumentError(
        absl::StrCat("last_checkpoint_time: ", FormatTimeForError(checkpoint),
                     " is before the gang's admission at ",
                     FormatTimeForError(*gang.admit_time)));
  }
  return absl::OkStatus();
}

// Whether any pod set of `spec` was placed against the topology tree: a
// constraint or slice above the node level.
bool UsesTopologyTree(const GangSpec& spec) {
  return std::any_of(
      spec.pod_sets.begin(), spec.pod_sets.end(), [](const PodSetSpec& set) {
        return (set.topology.mode != TopologyMode::kUnconstrained &&
                set.topology.level != kNodeLevel) ||
               (set.slice.size > 0 && set.slice.level != kNodeLevel);
      });
}
}  // namespace

Scheduler::Scheduler(Config config)
    : config_(std::move(config)),
      fleet_(config_.topology_levels),
      ledger_(config_.fair_share),
      dirty_config_(true) {}

namespace {

// The counters a damaged meta record could set past what later arithmetic
// (revision_ + 1, the retention window) can hold. 2^62 events is 146,000
// years at a million events a second.
constexpr int64_t kMaxCounter = int64_t{1} << 62;

absl::Status CheckMeta(const Meta& meta) {
  if (meta.last_revision < 0 || meta.last_revision >= kMaxCounter) {
    return absl::InvalidArgumentError(absl::StrCat(
        "meta.last_revision: ", meta.last_revision, " is outside [0, 2^62)"));
  }
  if (meta.next_gang_seq < 1 || meta.next_gang_seq >= kMaxCounter) {
    return absl::InvalidArgumentError(absl::StrCat(
        "meta.next_gang_seq: ", meta.next_gang_seq, " is outside [1, 2^62)"));
  }
  if (meta.first_retained_revision < 1 ||
      meta.first_retained_revision > meta.last_revision + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "meta.first_retained_revision: ", meta.first_retained_revision,
        " is outside [1, last_revision + 1 = ", meta.last_revision + 1, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Restore(LoadedState state,
                                                              absl::Time now) {
  auto scheduler = std::make_unique<Scheduler>(state.config.value_or(Config{}));
  Scheduler& s = *scheduler;
  auto refuse = [](absl::string_view why) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing to start: ", why));
  };
  // A stored node passed validation when it was written; one that no longer
  // does (a damaged store) must not size the free index. Sizes are checked
  // against the widest limits a config may set, so nodes stored under
  // looser limits than today's still load.
  if (absl::Status st = CheckMeta(state.meta); !st.ok()) {
    return refuse(st.message());
  }
  LimitsConfig widest;
  widest.max_labels = 1024;
  widest.max_label_key_bytes = 1024;
  widest.max_label_value_bytes = 65536;
  widest.max_id_bytes = 4096;
  for (const Node& node : state.nodes) {
    if (absl::Status st = ValidateNodeSpec(node.spec, widest, "node");
        !st.ok()) {
      return refuse(st.message());
    }
    if (absl::Status st = s.fleet_.CheckUpsert(node.spec); !st.ok()) {
      return refuse(
          absl::StrCat("node ", node.spec.id.value(), ": ", st.message()));
    }
    s.heartbeats_[node.spec.id] = now;
    if (node.drain_deadline) {
      s.drain_timers_.insert({*node.drain_deadline, node.spec.id});
    }
  }
  s.fleet_.Upsert(state.nodes);
  for (Queue& queue : state.queues) {
    s.queues_[queue.name] = std::move(queue);
  }
  // The groups with a pending member whose stored reason is not NO_FIT;
  // every other group keeps any stamp (PendingGroup::keeps_any_stamp).
  absl::flat_hash_set<const PendingGroup*> restamp;
  for (Gang& gang : state.gangs) {
    // Placement requires the levels a waiting gang names to exist (Submit
    // and UpdateConfig keep it so; a damaged record need not).
    for (size_t i = 0; i < gang.spec.pod_sets.size() && !IsFinal(gang.state);
         ++i) {
      if (absl::Status st = s.CheckLevels(gang.spec.pod_sets[i],
                                          absl::StrCat("pod_sets[", i, "]"));
          !st.ok()) {
        return refuse(
            absl::StrCat("gang ", gang.id.value(), ": ", st.message()));
      }
    }
    // A waiting gang's shape passed validation when it was submitted; a
    // damaged record (a pod set of 0 pods) would break placement's
    // invariants. Only the shape is checked (not labels, ids or the queue's
    // name, which do not reach placement), so gangs stored under looser
    // limits than today's still load.
    if (!IsFinal(gang.state)) {
      GangSpec shape = gang.spec;
      shape.labels.clear();
      shape.request_id.clear();
      shape.queue = QueueName("stored");
      if (absl::Status st = ValidateGangSpec(shape, widest, "spec"); !st.ok()) {
        return refuse(
            absl::StrCat("gang ", gang.id.value(), ": ", st.message()));
      }
    }
    if (!s.queues_.contains(gang.spec.queue) && !IsFinal(gang.state)) {
      return refuse(absl::StrCat("gang ", gang.id.value(),
                                 " is in unknown queue ",
                                 gang.spec.queue.value()));
    }
    const bool holds = HoldsCapacity(gang.state);
    // A final gang may keep its last placement, released; nothing else
    // holds a placement without holding its GPUs.
    const bool kept = IsFinal(gang.state) && gang.placement_released;
    if ((holds && gang.placement_released) ||
        (!kept && holds != !gang.placement.empty()) ||
        (holds &&
         static_cast<int>(gang.placement.size()) != gang.spec.TotalPods())) {
      return refuse(absl::StrCat("gang ", gang.id.value(), " is ",
                                 GangStateName(gang.state), " with ",
                                 gang.placement.size(), " of ",
                                 gang.spec.TotalPods(), " pods placed"));
    }
    if (holds) {
      if (absl::Status st = s.fleet_.Allocate(gang, gang.placement); !st.ok()) {
        return refuse(st.message());
      }
    }
    if (gang.state == GangState::kPreempting && !gang.grace_deadline) {
      // A record from before grace_deadline existed: a fresh grace period.
      gang.grace_deadline = now + s.config_.preemption.grace_period;
    }
    GangPtr stored = s.Put(std::move(gang));
    if (holds) {
      s.Charge(*stored, +1);
      s.ArmTimers(*stored);
    }
    if (stored->state == GangState::kPreempting) {
      // The deadline the launcher was told (its GPUs are taken then).
      const absl::Time deadline = *stored->grace_deadline;
      s.preemptor_of_[stored->id] = Preemption{GangId(), deadline};
      s.timers_.insert({deadline, stored->id});
    }
    if (stored->state == GangState::kPending &&
        !stored->reason.starts_with("NO_FIT")) {
      restamp.insert(s.pending_.GroupOf(stored->id));
    }
  }
  for (auto& [key, group] : s.pending_.groups()) {
    group.keeps_any_stamp = !restamp.contains(&group);
  }
  // Launchers could not renew their leases while the daemon was down: none
  // lapses during the start-up grace (as no node heartbeat times out then),
  // those of gangs admitted meanwhile included.
  if (s.leases_.size() > 0) {
    s.leases_.set_not_before(now + s.config_.startup_grace);
  }
  for (RequestRecord& record : state.requests) {
    auto key = std::make_pair(record.queue, record.request_id);
    s.request_expiry_.insert({record.expires, key});
    s.requests_[key] = std::move(record);
  }
  for (auto& [queue, entry] : state.ledger) {
    s.ledger_.Restore(queue, std::move(entry));
  }
  s.started_at_ = now;
  s.revision_ = state.meta.last_revision;
  s.next_gang_seq_ = state.meta.next_gang_seq;
  s.first_retained_revision_ = state.meta.first_retained_revision;
  // Nothing loaded needs writing back.
  s.dirty_gangs_.clear();
  s.dirty_config_ = false;
  return scheduler;
}

// ---------------------------------------------------------------------------
// State bookkeeping.

const HeldGpus& Scheduler::Held(const QueueName& queue) const {
  static const HeldGpus kNone;
  auto it = usage_.find(queue);
  return it == usage_.end() ? kNone : it->second.held_gpus;
}

namespace {

// A gang's key in active_by_queue_.
std::pair<absl::Time, GangId> ActiveKey(const Gang& gang) {
  return {gang.admit_time.value_or(absl::InfiniteFuture()), gang.id};
}

}  // namespace

GangPtr Scheduler::Put(Gang gang) {
  // What the placement means follows from the state: held while the gang
  // holds capacity; none while pending; the last one, released, once final.
  if (HoldsCapacity(gang.state)) {
    gang.placement_released = false;
  } else if (gang.state == GangState::kPending) {
    gang.placement.clear();
    gang.placement_released = false;
  } else {
    gang.placement_released = !gang.placement.empty();
  }
  bool was_pending = false;
  // What the indexes below hold for the gang follows from its stored
  // record: no lookup is made for an entry that cannot be there.
  bool held = false;
  bool leased = false;
  auto it = gangs_.find(gang.id);
  if (it != gangs_.end()) {
    const Gang& old = *it->second;
    // A pending gang that stays pending keeps its place (only its reason
    // or other bookkeeping changes).
    if (old.state == GangState::kPending && gang.state != GangState::kPending) {
      pending_.Erase(old);
      // Its reservation, if any, goes at the next cycle.
      if (ReservationOf(old.id) != nullptr) BumpEpoch();
    }
    was_pending = old.state == GangState::kPending;
    held = HoldsCapacity(old.state);
    leased = old.lease_expire_time.has_value();
    if (held) {
      active_ends_.erase(active_ends_.find(RunningUntil(old)));
      auto queue = active_by_queue_.find(old.spec.queue);
      auto level = queue->second.find(old.spec.priority);
      level->second.erase(ActiveKey(old));
      if (level->second.empty()) queue->second.erase(level);
      if (queue->second.empty()) active_by_queue_.erase(queue);
    }
    if (IsFinal(old.state)) finished_.erase({FinishTime(old), old.id});
    --gang_counts_[{old.spec.queue, old.state}];
  }
  if (gang.state == GangState::kPending) {
    if (!was_pending) pending_.Insert(gang);
  } else {
    DropHolds(gang.id);  // an admitted or finished preemptor
  }
  if (gang.state != GangState::kPreempting) {
    preemptor_of_.erase(gang.id);
    gang.grace_deadline.reset();
  }
  if (HoldsCapacity(gang.state)) {
    active_.insert(gang.id);
    active_ends_.insert(RunningUntil(gang));
    active_by_queue_[gang.spec.queue][gang.spec.priority].insert(
        ActiveKey(gang));
  } else {
    if (held) active_.erase(gang.id);
    gang.lease_expire_time.reset();  // a lease covers held GPUs only
  }
  if (gang.lease_expire_time) {
    leases_.Set(gang.id, *gang.lease_expire_time);
  } else if (leased) {
    leases_.Erase(gang.id);
  }
  if (IsFinal(gang.state)) {
    finished_.insert({FinishTime(gang), gang.id});
    tombstones_.erase(gang.id);  // back under retention
  }
  ++gang_counts_[{gang.spec.queue, gang.state}];
  auto ptr = std::make_shared<const Gang>(std::move(gang));
  // Nothing above adds or removes a gang record: `it` still stands.
  if (it != gangs_.end()) {
    it->second = ptr;
  } else {
    gangs_.emplace(ptr->id, ptr);
  }
  dirty_gangs_[ptr->id] = ptr;
  return ptr;
}

GangPtr Scheduler::Transition(Gang gang, EventType type, absl::Time now) {
  gang.revision = ++revision_;
  dirty_meta_ = true;
  GangPtr ptr = Put(std::move(gang));
  events_.push_back(Event{revision_, type, now, ptr});
  return ptr;
}

// Adds (sign +1) or removes (-1) a gang's GPUs to its queue's usage.
void Scheduler::Charge(const Gang& gang, int sign) {
  QueueUsage& usage = usage_[gang.spec.queue];
  // Summed over each run of pods on one model: one map update per run.
  const std::string* model = nullptr;
  int64_t gpus = 0;
  for (const PodPlacement& pod : gang.placement) {
    const int slot = fleet_.Find(pod.node);
    PHALANX_CHECK(slot >= 0);
    const std::string& pod_model = fleet_.slots()[slot].node.spec.gpu_model;
    if (model != nullptr && *model != pod_model) {
      usage.held_gpus[*model] += sign * gpus;
      gpus = 0;
    }
    model = &pod_model;
    gpus += static_cast<int64_t>(pod.gpu_indices.size());
  }
  if (model != nullptr) usage.held_gpus[*model] += sign * gpus;
}

// Frees the gang's capacity; pending gangs may now fit, so the capacity
// epoch moves. The placement stays on the record, released (Put clears it
// when the gang goes back to PENDING, keeps it when the gang is final).
void Scheduler::ReleaseCapacity(Gang& gang, absl::Time now) {
  if (!HoldsCapacity(gang.state)) return;
  ledger_.Accrue(gang.spec.queue, Held(gang.spec.queue), now);
  Charge(gang, -1);
  BumpEpoch();
  fleet_.Release(gang, gang.placement);
  gang.placement_released = true;
}

void Scheduler::SetReason(const GangPtr& gang, std::string reason) {
  if (gang->reason == reason) return;
  Gang copy = *gang;
  copy.reason = std::move(reason);
  if (gang->state == GangState::kPending) {
    PendingGroup* group = pending_.GroupOf(gang->id);
    if (group != nullptr &&
        (group->keeps_any_stamp || group->stamped != copy.reason)) {
      group->Unstamp(gang->id);
    }
    // The stored record of a pending gang, with only its reason new: no
    // index Put keeps changes (its group, counts, holds, leases and timers
    // stay as they are), so only the record is replaced.
    auto it = gangs_.find(gang->id);
    if (it != gangs_.end() && it->second == gang) {
      it->second = std::make_shared<const Gang>(std::move(copy));
      dirty_gangs_[it->first] = it->second;
      return;
    }
  }
  Put(std::move(copy));
}

GangPtr Scheduler::FindGang(const GangId& id) const {
  auto it = gangs_.find(id);
  return it == gangs_.end() ? nullptr : it->second;
}

const Gang* Scheduler::PeekGang(const GangId& id) const {
  auto it = gangs_.find(id);
  return it == gangs_.end() ? nullptr : it->second.get();
}

std::optional<absl::Time> Scheduler::LastHeartbeat(const NodeId& id) const {
  auto it = heartbeats_.find(id);
  if (it == heartbeats_.end()) return std::nullopt;
  return it->second;
}

QueueUsage Scheduler::Usage(const QueueName& name) const {
  QueueUsage usage;
  if (auto it = usage_.find(name); it != usage_.end()) usage = it->second;
  for (auto it = gang_counts_.lower_bound({name, GangState::kPending});
       it != gang_counts_.end() && it->first.first == name; ++it) {
    if (it->first.second == GangState::kPending) usage.pending += it->second;
    if (HoldsCapacity(it->first.second)) usage.active += it->second;
  }
  return usage;
}

// ---------------------------------------------------------------------------
// Gang commands.

absl::Status Scheduler::CheckSubmittable(const GangSpec& spec) const {
  if (!queues_.contains(spec.queue)) {
    return absl::NotFoundError(absl::StrCat("spec.queue: no queue ",
                                            QuoteForError(spec.queue.value())));
  }
  for (size_t i = 0; i < spec.pod_sets.size(); ++i) {
    RETURN_IF_ERROR(
        CheckLevels(spec.pod_sets[i], absl::StrCat("spec.pod_sets[", i, "]")));
  }
  if (const std::string& why = NeverFitsReason(spec);
      !why.empty() && !config_.admission.accept_unfit_gangs) {
    return absl::FailedPreconditionError(absl::StrCat("spec: ", why));
  }
  return absl::OkStatus();
}

std::string Scheduler::NeverFitsPending(const GangSpec& spec) const {
  if (!config_.admission.accept_unfit_gangs) return "";
  const std::string& why = NeverFitsReason(spec);
  if (why.empty()) return "";
  absl::string_view what = why;
  absl::ConsumePrefix(&what, "can never fit: ");
  return absl::StrCat(kNeverFitsPrefix, what,
                      " (checked again when nodes change)");
}

absl::Status Scheduler::CheckLevels(const PodSetSpec& set,
                                    absl::string_view field) const {
  auto unknown = [&](absl::string_view what, absl::string_view level) {
    std::vector<std::string> known = fleet_.levels();
    known.push_back(kNodeLevel);
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".", what, ": unknown level ", QuoteForError(level),
                     " (levels: ", absl::StrJoin(known, ", "), ")"));
  };
  const TopologyConstraint& topo = set.topology;
  const int level = topo.mode == TopologyMode::kUnconstrained
                        ? -1
                        : fleet_.LevelIndex(topo.level);
  if (topo.mode != TopologyMode::kUnconstrained && level < 0) {
    return unknown("topology.level", topo.level);
  }
  if (set.slice.size == 0) return absl::OkStatus();
  const int slice_level = fleet_.LevelIndex(set.slice.level);
  if (slice_level < 0) return unknown("slice.level", set.slice.level);
  if (slice_level < level) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".slice.level: ", QuoteForError(set.slice.level),
        " is wider than topology.level ", QuoteForError(topo.level)));
  }
  return absl::OkStatus();
}

// Placing against every GPU of the fleet costs a pass over all nodes, so the
// answer is kept per placement shape until the fleet's structure changes.
const std::string& Scheduler::NeverFitsReason(const GangSpec& spec) const {
  constexpr size_t kMaxShapes = 4096;
  if (ever_fits_version_ != fleet_.structure_version() ||
      ever_fits_.size() >= kMaxShapes) {
    ever_fits_.clear();
    ever_fits_version_ = fleet_.structure_version();
  }
  auto [it, added] = ever_fits_.try_emplace(PlacementShapeKey(spec));
  if (!added) return it->second;
  // Each pod set on every GPU first (cheap, and it names the set that can
  // never fit); then, for several pod sets, the joint search on an idle
  // twin of the fleet, where the sets take room from one another.
  Fleet& fleet = const_cast<Fleet&>(fleet_);  // kTotal never allocates
  it->second = PlaceGang(spec, fleet, CapacityBasis::kTotal).reason;
  if (it->second.empty() && spec.pod_sets.size() > 1) {
    if (idle_twin_ == nullptr ||
        idle_twin_version_ != fleet_.structure_version()) {
      idle_twin_ = std::make_unique<Fleet>(fleet_.levels());
      std::vector<Node> nodes;
      nodes.reserve(fleet_.slots().size());
      for (const Fleet::Slot& slot : fleet_.slots()) {
        nodes.push_back(slot.node);
        nodes.back().state = NodeState::kReady;
      }
      idle_twin_->Upsert(nodes);
      idle_twin_version_ = fleet_.structure_version();
    }
    PlacementResult joint = PlaceGang(spec, *idle_twin_);
    if (!joint.placed) {
      std::string why =
          absl::StrReplaceAll(joint.reason, {{"NO_FIT: ", ""},
                                             {"NO_FIT at level ", "at level "},
                                             {"largest free ", "largest "}});
      it->second = absl::StrCat("can never fit: ", why);
    }
  }
  return it->second;
}

absl::Status Scheduler::ResolvePriorityClass(GangSpec& spec) const {
  if (spec.priority_class.empty()) return absl::OkStatus();
  auto it = config_.priority_classes.find(spec.priority_class);
  if (it == config_.priority_classes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.priority_class: no priority class ",
                     QuoteForError(spec.priority_class)));
  }
  if (spec.priority != 0 && spec.priority != it->second) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.priority: ", spec.priority, " contradicts priority_class ",
        QuoteForError(spec.priority_class), " (", it->second, ")"));
  }
  spec.priority = it->second;
  return absl::OkStatus();
}

absl::Status Scheduler::CheckMaxPriority(const GangSpec& spec) const {
  auto it = queues_.find(spec.queue);
  if (it == queues_.end() || !it->second.max_priority) return absl::OkStatus();
  if (spec.priority <= *it->second.max_priority) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("spec.priority: ", spec.priority, " is above queue ",
                   QuoteForError(spec.queue.value()), "'s max_priority ",
                   *it->second.max_priority));
}

absl::StatusOr<SubmitResult> Scheduler::Submit(GangSpec spec, absl::Time now,
                                               std::string owner) {
  NormalizeGangSpec(spec);
  RETURN_IF_ERROR(ValidateGangSpec(spec, config_.limits, "spec"));
  RETURN_IF_ERROR(ResolvePriorityClass(spec));
  const uint64_t fingerprint = SpecFingerprint(spec);
  auto key = std::make_pair(spec.queue, spec.request_id);
  if (!spec.request_id.empty()) {
    if (auto it = requests_.find(key); it != requests_.end()) {
      const RequestRecord& record = it->second;
      GangPtr original = FindGang(record.gang_id);
      if (record.spec_fingerprint != fingerprint) {
        return absl::AlreadyExistsError(
            absl::StrCat("spec.request_id: ", QuoteForError(spec.request_id),
                         " was used by gang ", record.gang_id.value(),
                         " with a different spec"));
      }
      if (original == nullptr) {
        return absl::AlreadyExistsError(
            absl::StrCat("spec.request_id: ", QuoteForError(spec.request_id),
                         " was used by gang ", record.gang_id.value(),
                         ", which retention has since deleted"));
      }
      return SubmitResult{original, false};
    }
  }
  RETURN_IF_ERROR(CheckMaxPriority(spec));
  RETURN_IF_ERROR(CheckSubmittable(spec));
  if (const int64_t pending = Usage(spec.queue).pending;
      pending >= config_.limits.max_pending_gangs_per_queue) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "spec.queue: queue ", QuoteForError(spec.queue.value()), " has ",
        pending,
        " pending gangs, the most limits.max_pending_gangs_per_queue "
        "allows"));
  }

  Gang gang;
  gang.id = GangId(absl::StrFormat("g-%06d", next_gang_seq_++));
  gang.spec = std::move(spec);
  gang.owner = std::move(owner);
  gang.state = GangState::kPending;
  gang.reason = NeverFitsPending(gang.spec);
  if (gang.reason.empty()) gang.reason = kWaitingReason;
  gang.submit_time = now;
  if (!gang.spec.request_id.empty()) {
    RequestRecord record{key.first, key.second, gang.id, fingerprint,
                         now + config_.idempotency_retention};
    request_expiry_.insert({record.expires, key});
    requests_[key] = record;
    requests_put_.push_back(std::move(record));
  }
  return SubmitResult{Transition(std::move(gang), EventType::kSubmitted, now),
                      true};
}

absl::StatusOr<GangPtr> Scheduler::Cancel(const GangId& id,
                                          absl::string_view reason,
                                          absl::Time now) {
  GangPtr current = FindGang(id);
  if (current == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("gang_id: no gang ", QuoteForError(id.value())));
  }
  RETURN_IF_ERROR(ValidateMessage(reason, config_.limits, "reason"));
  if (IsFinal(current->state)) return current;
  Gang gang = *current;
  ReleaseCapacity(gang, now);
  gang.state = GangState::kCancelled;
  gang.reason = "CANCELLED";
  gang.message = std::string(reason);
  gang.finish_time = now;
  return Transition(std::move(gang), EventType::kCancelled, now);
}

absl::StatusOr<GangPtr> Scheduler::Report(const GangReport& report,
                                          absl::Time now) {
  GangPtr current = FindGang(report.gang_id);
  if (current == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "gang_id: no gang ", QuoteForError(report.gang_id.value())));
  }
  if (!report.state && !report.preemption_acknowledged &&
      !report.last_checkpoint_time) {
    return absl::InvalidArgumentError(
        "state: report RUNNING, SUCCEEDED or FAILED, a checkpoint, or "
        "preemption_acknowledged");
  }
  RETURN_IF_ERROR(ValidateMessage(report.message, config_.limits, "message"));
  if (report.last_checkpoint_time) {
    RETURN_IF_ERROR(
        CheckCheckpoint(*current, *report.last_checkpoint_time, now));
  }
  Gang gang = *current;
  const GangState from = gang.state;
  auto refuse = [&](absl::string_view what) {
    return absl::FailedPreconditionError(
        absl::StrCat("gang ", gang.id.value(), " is ", GangStateName(from),
                     ": cannot ", what));
  };
  if (report.preemption_acknowledged && from != GangState::kPreempting) {
    return refuse("acknowledge a preemption");
  }
  std::optional<EventType> event;
  if (report.state == GangState::kRunning) {
    if (from != GangState::kAdmitted && from != GangState::kRunning) {
      return refuse("report RUNNING");
    }
    if (from == GangState::kAdmitted) event = EventType::kRunning;
    gang.state = GangState::kRunning;
  } else if (report.state == GangState::kSucceeded ||
             report.state == GangState::kFailed) {
    if (from == *report.state) return current;  // a repeated report
    if (!HoldsCapacity(from)) {
      return refuse(absl::StrCat("report ", GangStateName(*report.state)));
    }
    ReleaseCapacity(gang, now);
    gang.state = *report.state;
    gang.reason = GangStateName(*report.state);
    gang.finish_time = now;
    event = *report.state == GangState::kSucceeded ? EventType::kSucceeded
                                                   : EventType::kFailed;
  } else if (report.state.has_value()) {
    return absl::InvalidArgumentError(
        "state: only RUNNING, SUCCEEDED or FAILED can be reported");
  }
  if (report.preemption_acknowledged && !event) {
    gang.reason = PreemptedReason(gang.id);
    ReleaseCapacity(gang, now);
    gang.state = GangState::kPending;
    event = EventType::kRequeued;
  }
  if (report.last_checkpoint_time) {
    gang.last_checkpoint_time = report.last_checkpoint_time;
  }
  if (!report.message.empty()) gang.message = report.message;
  if (!event && gang.last_checkpoint_time != current->last_checkpoint_time) {
    event = EventType::kCheckpointed;
  }
  if (event) return Transition(std::move(gang), *event, now);
  if (gang == *current) return current;
  return Put(std::move(gang));
}

absl::StatusOr<GangPtr> Scheduler::RenewLease(const GangId& id,
                                              absl::Time now) {
  GangPtr current = FindGang(id);
  if (current == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("gang_id: no gang ", QuoteForError(id.value())));
  }
  if (current->spec.lease_duration <= absl::ZeroDuration()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gang ", id.value(),
        " has no lease (it was submitted without lease_duration)"));
  }
  if (!HoldsCapacity(current->state)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gang ", id.value(), " is ", GangStateName(current->state),
        current->state == GangState::kPending
            ? ": its lease starts when it is admitted"
            : absl::StrCat(": its lease has ended (", current->reason, ")")));
  }
  Gang gang = *current;
  gang.lease_expire_time = now + gang.spec.lease_duration;
  return Put(std::move(gang));  // no event, no revision: watchers see nothing
}

// ---------------------------------------------------------------------------
// Fleet commands.

absl::StatusOr<std::vector<Node>> Scheduler::UpsertNodes(
    std::vector<Node> nodes, absl::Time now, ExistingNodeState existing) {
  std::set<NodeId> seen;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string field = absl::StrCat("nodes[", i, "]");
    RETURN_IF_ERROR(ValidateNodeSpec(nodes[i].spec, config_.limits, field));
    if (!seen.insert(nodes[i].spec.id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".id: ", QuoteForError(nodes[i].spec.id.value()),
                       " appears twice"));
    }
    if (absl::Status s = fleet_.CheckUpsert(nodes[i].spec); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(field, ".", s.message()));
    }
    if (const int slot = fleet_.Find(nodes[i].spec.id); slot >= 0) {
      const Node& old = fleet_.slots()[slot].node;
      if (existing == ExistingNodeState::kRefuse &&
          nodes[i].state != old.state) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".state: node ", QuoteForError(old.spec.id.value()), " is ",
            NodeStateName(old.state),
            "; UpsertNodes does not change the state "
            "of an existing node (use SetNodeState, or leave state unset)"));
      }
      nodes[i].state = old.state;
      nodes[i].state_reason = old.state_reason;
      nodes[i].drain_deadline = old.drain_deadline;
    } else if (nodes[i].drain_deadline &&
               nodes[i].state != NodeState::kDraining) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".drain_deadline: only a DRAINING node has one"));
    }
  }
  fleet_.Upsert(nodes);
  BumpEpoch();
  for (const Node& node : nodes) {
    if (node.drain_deadline) {
      drain_timers_.insert({*node.drain_deadline, node.spec.id});
    }
    if (now != absl::InfinitePast()) heartbeats_.try_emplace(node.spec.id, now);
    dirty_nodes_.insert(node.spec.id);
    deleted_nodes_.erase(node.spec.id);
  }
  return nodes;
}

absl::StatusOr<Node> Scheduler::SetNodeState(
    const NodeId& id, NodeState state, absl::string_view reason, absl::Time now,
    std::optional<absl::Time> drain_deadline) {
  const int slot = fleet_.Find(id);
  if (slot < 0) {
    return absl::NotFoundError(
        absl::StrCat("node_id: no node ", QuoteForError(id.value())));
  }
  RETURN_IF_ERROR(ValidateMessage(reason, config_.limits, "reason"));
  if (drain_deadline && state != NodeState::kDraining) {
    return absl::InvalidArgumentError(
        absl::StrCat("drain_deadline: only a DRAINING node takes one, not ",
                     NodeStateName(state)));
  }
  MarkNode(slot, state, reason, drain_deadline);
  if (state == NodeState::kUnhealthy) {
    VacateNodes({slot}, VacateCause::kUnhealthy, now);
  }
  if (state == NodeState::kReady) BumpEpoch();
  return fleet_.slots()[slot].node;
}

absl::Status Scheduler::RemoveNode(const NodeId& id) {
  const int slot = fleet_.Find(id);
  if (slot < 0) {
    return absl::NotFoundError(
        absl::StrCat("node_id: no node ", QuoteForError(id.value())));
  }
  const Fleet::Slot& s = fleet_.slots()[slot];
  if (!s.Idle()) {
    std::vector<std::string> holders;
    for (const auto& [gang, pods] : s.gang_pods)
      holders.push_back(gang.value());
    return absl::FailedPreconditionError(absl::StrCat(
        "node_id: node ", QuoteForError(id.value()), " holds gangs ",
        absl::StrJoin(holders, ", "), "; drain it or mark it UNHEALTHY first"));
  }
  fleet_.Remove(id);
  heartbeats_.erase(id);
  dirty_nodes_.erase(id);
  deleted_nodes_.insert(id);
  return absl::OkStatus();
}

absl::Status Scheduler::Heartbeat(const std::vector<NodeId>& ids,
                                  absl::Time now) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (fleet_.Find(ids[i]) < 0) {
      return absl::NotFoundError(absl::StrCat("node_ids[", i, "]: no node ",
                                              QuoteForError(ids[i].value())));
    }
  }
  for (const NodeId& id : ids) heartbeats_[id] = now;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Admin commands.

absl::StatusOr<Queue> Scheduler::PutQueue(Queue queue) {
  RETURN_IF_ERROR(ValidateQueue(queue, config_.limits, "queue"));
  if (!queue.parent.empty()) {
    if (!queues_.contains(queue.parent)) {
      return absl::NotFoundError(absl::StrCat(
          "queue.parent: no queue ", QuoteForError(queue.parent.value())));
    }
    for (QueueName up = queue.parent; !up.empty(); up = queues_.at(up).parent) {
      if (up == queue.name) {
        return absl::InvalidArgumentError(
            "queue.parent: would make a cycle of queues");
      }
    }
  }
  queues_[queue.name] = queue;
  BumpEpoch();
  dirty_queues_.insert(queue.name);
  deleted_queues_.erase(queue.name);
  return queue;
}

absl::Status Scheduler::DeleteQueue(const QueueName& name) {
  if (!queues_.contains(name)) {
    return absl::NotFoundError(
        absl::StrCat("name: no queue ", QuoteForError(name.value())));
  }
  const QueueUsage usage = Usage(name);
  if (usage.pending + usage.active > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "name: queue ", QuoteForError(name.value()), " has ", usage.pending,
        " pending and ", usage.active, " active gangs"));
  }
  for (const auto& [child, queue] : queues_) {
    if (queue.parent == name) {
      return absl::FailedPreconditionError(
          absl::StrCat("name: queue ", QuoteForError(name.value()),
                       " is the parent of ", QuoteForError(child.value())));
    }
  }
  queues_.erase(name);
  ledger_.Forget(name);
  ledger_deleted_.push_back(name);
  BumpEpoch();
  dirty_queues_.erase(name);
  deleted_queues_.insert(name);
  return absl::OkStatus();
}

absl::StatusOr<Config> Scheduler::UpdateConfig(
    Config config, std::optional<int64_t> expected_version) {
  if (expected_version && *expected_version != config_.version) {
    return absl::AbortedError(absl::StrCat("expected_version: config is at ",
                                           config_.version, ", not ",
                                           *expected_version));
  }
  RETURN_IF_ERROR(ValidateConfig(config, "config"));
  const std::vector<std::string>& levels = config.topology_levels;
  if (levels != config_.topology_levels) {
    // Placements of admitted gangs were checked against the old tree; under
    // a new one a REQUIRED rack could span racks. active_ is sorted, so the
    // gang named is the lowest id.
    for (const GangId& id : active_) {
      const Gang& gang = *gangs_.at(id);
      if (!UsesTopologyTree(gang.spec)) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "config.topology_levels: gang ", id.value(), " is ",
          GangStateName(gang.state),
          " under a topology constraint placed on the current levels; change "
          "them when no such gang holds GPUs"));
    }
  }
  for (const auto& [id, gang] : gangs_) {
    if (IsFinal(gang->state)) continue;
    for (const PodSetSpec& set : gang->spec.pod_sets) {
      const std::string& level = set.topology.level;
      if (set.topology.mode != TopologyMode::kUnconstrained &&
          level != kNodeLevel &&
          std::find(levels.begin(), levels.end(), level) == levels.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat("config.topology_levels: gang ", id.value(),
                         " uses level ", QuoteForError(level)));
      }
    }
  }
  if (absl::Status s = fleet_.SetLevels(levels); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("config.topology_levels: ", s.message()));
  }
  config.version = config_.version + 1;
  config_ = std::move(config);
  ledger_.set_config(config_.fair_share);
  BumpEpoch();
  dirty_config_ = true;
  return config_;
}

void Scheduler::ExpireAndTrim(absl::Time now) {
  while (!request_expiry_.empty() && request_expiry_.begin()->first <= now) {
    auto key = request_expiry_.begin()->second;
    request_expiry_.erase(request_expiry_.begin());
    auto it = requests_.find(key);
    if (it != requests_.end() && it->second.expires <= now) {
      const GangId gang = it->second.gang_id;
      requests_.erase(it);
      requests_deleted_.push_back(key);
      // Retention already let the gang go; only its key kept it.
      if (tombstones_.erase(gang) > 0) DeleteGang(gang);
    }
  }
  const RetentionConfig& keep = config_.retention;
  while (!finished_.empty() &&
         (static_cast<int64_t>(finished_.size()) > keep.finished_gangs ||
          finished_.begin()->first + keep.finished_gang_age <= now)) {
    const GangId id = finished_.begin()->second;
    finished_.erase(finished_.begin());
    // A retried submit, get or cancel must still find the gang its live
    // request key names: it stays, out of retention's count, until the key
    // expires.
    if (RequestKeyLive(*gangs_.at(id))) {
      tombstones_.insert(id);
      continue;
    }
    DeleteGang(id);
  }
  if (revision_ - first_retained_revision_ + 1 > keep.events) {
    first_retained_revision_ = revision_ - keep.events + 1;
    trim_events_before_ = first_retained_revision_;
    dirty_meta_ = true;
  }
}

bool Scheduler::RequestKeyLive(const Gang& gang) const {
  if (gang.spec.request_id.empty()) return false;
  auto it = requests_.find({gang.spec.queue, gang.spec.request_id});
  return it != requests_.end() && it->second.gang_id == gang.id;
}

void Scheduler::DeleteGang(const GangId& id) {
  auto it = gangs_.find(id);
  PHALANX_CHECK(it != gangs_.end());
  --gang_counts_[{it->second->spec.queue, it->second->state}];
  gangs_.erase(it);
  dirty_gangs_.erase(id);
  deleted_gangs_.insert(id);
}

Mutation Scheduler::TakeMutation() {
  Mutation m;
  for (const auto& [id, gang] : dirty_gangs_) m.gangs_put.push_back(gang);
  m.gangs_deleted.assign(deleted_gangs_.begin(), deleted_gangs_.end());
  for (const NodeId& id : dirty_nodes_) {
    m.nodes_put.push_back(fleet_.slots()[fleet_.Find(id)].node);
  }
  m.nodes_deleted.assign(deleted_nodes_.begin(), deleted_nodes_.end());
  for (const QueueName& name : dirty_queues_) {
    m.queues_put.push_back(queues_.at(name));
  }
  m.queues_deleted.assign(deleted_queues_.begin(), deleted_queues_.end());
  if (dirty_config_) m.config = config_;
  m.requests_put = std::move(requests_put_);
  m.requests_deleted = std::move(requests_deleted_);
  for (const QueueName& queue : ledger_.TakeDirty()) {
    m.ledger_put.emplace_back(queue, ledger_.entries().at(queue));
  }
  m.ledger_deleted = std::move(ledger_deleted_);
  ledger_deleted_.clear();
  m.events = std::move(events_);
  m.trim_events_before = trim_events_before_;
  m.meta = Meta{revision_, next_gang_seq_, first_retained_revision_};

  dirty_gangs_.clear();
  deleted_gangs_.clear();
  dirty_nodes_.clear();
  deleted_nodes_.clear();
  dirty_queues_.clear();
  deleted_queues_.clear();
  dirty_config_ = false;
  requests_put_.clear();
  requests_deleted_.clear();
  events_.clear();
  trim_events_before_ = 0;
  dirty_meta_ = false;
  return m;
}

// ---------------------------------------------------------------------------
// Reads.

absl::StatusOr<Explanation> Scheduler::Explain(const GangId& id) const {
  GangPtr gang = FindGang(id);
  if (gang == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("gang_id: no gang ", QuoteForError(id.value())));
  }
  Explanation explanation{gang, "", 0, 0, std::nullopt};
  if (gang->state != GangState::kPending) return explanation;
  explanation.reason = gang->reason;
  int position = 0;
  int in_queue = 0;
  for (const GangPtr& other : StaticOrder()) {
    ++position;
    if (other->spec.queue == gang->spec.queue) ++in_queue;
    if (other->id == id) break;
  }
  explanation.position = position;
  explanation.position_in_queue = in_queue;
  if (const Reservation* held = ReservationOf(id)) {
    explanation.reservation = *held;
  }
  return explanation;
}

absl::StatusOr<PlacementResult> Scheduler::DryRun(GangSpec spec) {
  NormalizeGangSpec(spec);
  RETURN_IF_ERROR(ValidateGangSpec(spec, config_.limits, "spec"));
  RETURN_IF_ERROR(ResolvePriorityClass(spec));
  RETURN_IF_ERROR(CheckMaxPriority(spec));
  RETURN_IF_ERROR(CheckSubmittable(spec));
  if (std::string never = NeverFitsPending(spec); !never.empty()) {
    return PlacementResult{false, {}, std::move(never)};
  }
  return PlaceGang(spec, fleet_, OptionsFor(queues_.at(spec.queue)));
}

}  // namespace phalanx::core
