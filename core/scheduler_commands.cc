// Scheduler's commands: each checks its input, then changes state through
// the owners or changes nothing.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/elastic.h"
#include "core/node_vacator.h"
#include "core/resizer.h"
#include "core/scheduler.h"
#include "core/spec_checks.h"
#include "core/status_macros.h"
#include "core/validate.h"

namespace phalanx::core {
namespace {

std::string FormatTimeForError(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", time, absl::UTCTimeZone());
}

absl::Status NoGang(const GangId& id) {
  return absl::NotFoundError(
      absl::StrCat("gang_id: no gang ", QuoteForError(id.value())));
}

absl::Status NoNode(const NodeId& id) {
  return absl::NotFoundError(
      absl::StrCat("node_id: no node ", QuoteForError(id.value())));
}

// Copies onto `node` (an upsert of an existing node) what only state
// changes and health reports set.
void KeepNodeStatus(const Node& old, Node& node) {
  node.state = old.state;
  node.state_source = old.state_source;
  node.state_reason = old.state_reason;
  node.drain_deadline = old.drain_deadline;
  // GPUs the node no longer has drop out.
  const uint64_t present = node.spec.gpu_count >= 64
                               ? ~uint64_t{0}
                               : (uint64_t{1} << node.spec.gpu_count) - 1;
  node.unhealthy_gpu_mask = old.unhealthy_gpu_mask & present;
  node.unhealthy_gpus_reason =
      node.unhealthy_gpu_mask == 0 ? "" : old.unhealthy_gpus_reason;
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

// ---------------------------------------------------------------------------
// Gang commands.

// Accepts `spec` as a PENDING gang. NotFound for an unknown queue;
// InvalidArgument naming a bad field; FailedPrecondition when it can never
// fit the fleet; AlreadyExists for a reused request_id with another spec;
// PermissionDenied when its priority is above the queue's max_priority;
// ResourceExhausted when the queue holds the most pending gangs allowed.
// `owner` (the submitting principal) is recorded on a new gang.
absl::StatusOr<SubmitResult> Scheduler::Submit(GangSpec spec, absl::Time now,
                                               std::string owner) {
  NormalizeGangSpec(spec);
  RETURN_IF_ERROR(ValidateGangSpec(spec, config_.limits, "spec"));
  RETURN_IF_ERROR(ResolvePriorityClass(config_, spec));
  const uint64_t fingerprint = SpecFingerprint(spec);
  const RequestKeys::Key key{spec.queue, spec.request_id};
  if (!spec.request_id.empty()) {
    if (const RequestRecord* record = requests_.Find(key)) {
      GangPtr original = FindGang(record->gang_id);
      if (record->spec_fingerprint != fingerprint) {
        return absl::AlreadyExistsError(
            absl::StrCat("spec.request_id: ", QuoteForError(spec.request_id),
                         " was used by gang ", record->gang_id.value(),
                         " with a different spec"));
      }
      if (original == nullptr) {
        return absl::AlreadyExistsError(
            absl::StrCat("spec.request_id: ", QuoteForError(spec.request_id),
                         " was used by gang ", record->gang_id.value(),
                         ", which retention has since deleted"));
      }
      return SubmitResult{original, false};
    }
  }
  RETURN_IF_ERROR(CheckMaxPriority(quotas_, spec));
  RETURN_IF_ERROR(CheckSubmittable(spec, config_, quotas_, fleet_, fits_));
  if (const int64_t pending = Usage(spec.queue).pending;
      pending >= config_.limits.max_pending_gangs_per_queue) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "spec.queue: queue ", QuoteForError(spec.queue.value()), " has ",
        pending,
        " pending gangs, the most limits.max_pending_gangs_per_queue "
        "allows"));
  }

  Gang gang;
  gang.id = log_.NewGangId();
  gang.spec = std::move(spec);
  gang.owner = std::move(owner);
  gang.state = GangState::kPending;
  gang.reason_code = ReasonCode::kNeverFits;
  gang.reason = NeverFitsPending(gang.spec, config_, fleet_, fits_);
  if (gang.reason.empty()) {
    gang.reason_code = ReasonCode::kWaiting;
    gang.reason = kWaitingReason;
  }
  gang.submit_time = now;
  if (!gang.spec.request_id.empty()) {
    RequestRecord record{key.first, key.second, gang.id, fingerprint,
                         now + config_.idempotency_retention};
    requests_.Put(record);
    log_.PutRequest(std::move(record));
  }
  return SubmitResult{Transition(std::move(gang), EventType::kSubmitted, now),
                      true};
}

// Cancels a non-final gang (a final gang is returned unchanged).
absl::StatusOr<GangPtr> Scheduler::Cancel(const GangId& id,
                                          absl::string_view reason,
                                          absl::Time now) {
  GangPtr current = FindGang(id);
  if (current == nullptr) return NoGang(id);
  RETURN_IF_ERROR(ValidateMessage(reason, config_.limits, "reason"));
  if (IsFinal(current->state)) return current;
  Gang gang = *current;
  ReleaseCapacity(gang, now);
  gang.state = GangState::kCancelled;
  gang.reason_code = ReasonCode::kCancelled;
  gang.reason = "CANCELLED";
  gang.message = std::string(reason);
  gang.finish_time = now;
  return Transition(std::move(gang), EventType::kCancelled, now);
}

// Applies a launcher's report; FailedPrecondition for a transition the
// lifecycle does not allow. A checkpoint that changes nothing else is an
// event (CHECKPOINTED); a repeated identical report is not.
absl::StatusOr<GangPtr> Scheduler::Report(const GangReport& report,
                                          absl::Time now) {
  GangPtr current = FindGang(report.gang_id);
  if (current == nullptr) return NoGang(report.gang_id);
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
    gang.reason_code = *report.state == GangState::kSucceeded
                           ? ReasonCode::kSucceeded
                           : ReasonCode::kFailed;
    gang.reason = GangStateName(*report.state);
    gang.finish_time = now;
    event = *report.state == GangState::kSucceeded ? EventType::kSucceeded
                                                   : EventType::kFailed;
  } else if (report.state.has_value()) {
    return absl::InvalidArgumentError(
        "state: only RUNNING, SUCCEEDED or FAILED can be reported");
  }
  if (report.last_checkpoint_time) {
    gang.last_checkpoint_time = report.last_checkpoint_time;
  }
  if (!report.message.empty()) gang.message = report.message;
  if (report.preemption_acknowledged && !event) {
    // A shrink ends with the gang running on fewer pods (core/resizer.h).
    if (gang.shrink_to > 0) return Resizer(*this, now).FinishShrink(gang);
    RequeueVictim(gang, now);
    event = EventType::kRequeued;
  }
  if (!event && gang.last_checkpoint_time != current->last_checkpoint_time) {
    event = EventType::kCheckpointed;
  }
  if (event) return Transition(std::move(gang), *event, now);
  if (gang == *current) return current;
  return Put(std::move(gang));
}

// Renews a leased gang's lease to now + its lease_duration. No event and
// no revision: only the gang's lease_expire_time moves (it is written).
// NotFound for an unknown gang; FailedPrecondition when it has no lease
// or holds no GPUs (pending: its lease starts at admission; final).
absl::StatusOr<GangPtr> Scheduler::RenewLease(const GangId& id,
                                              absl::Time now) {
  GangPtr current = FindGang(id);
  if (current == nullptr) return NoGang(id);
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

// Where `spec` would go now; nothing changes. Errors as Submit.
absl::StatusOr<PlacementResult> Scheduler::DryRun(GangSpec spec) {
  NormalizeGangSpec(spec);
  RETURN_IF_ERROR(ValidateGangSpec(spec, config_.limits, "spec"));
  RETURN_IF_ERROR(ResolvePriorityClass(config_, spec));
  RETURN_IF_ERROR(CheckMaxPriority(quotas_, spec));
  RETURN_IF_ERROR(CheckSubmittable(spec, config_, quotas_, fleet_, fits_));
  if (std::string never = NeverFitsPending(spec, config_, fleet_, fits_);
      !never.empty()) {
    return PlacementResult{false, {}, std::move(never), ReasonCode::kNeverFits};
  }
  const PlacementOptions options = OptionsFor(quotas_.queues().at(spec.queue));
  PlacementResult placement = PlaceGang(spec, fleet_, options);
  // An elastic gang would start at the largest size that fits.
  if (!placement.placed && IsElastic(spec)) {
    GangSpec sized;
    placement = PlaceLargestSize(
        spec,
        [&](const GangSpec& at) { return PlaceGang(at, fleet_, options); },
        &sized);
  }
  return placement;
}

// ---------------------------------------------------------------------------
// Fleet commands.

// Adds or updates nodes, all or none. New nodes get the state they carry;
// existing nodes keep theirs (or, with kRefuse, a different state fails
// with InvalidArgument pointing at SetNodeState). New nodes count as heard
// from at `now` (when given).
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
      KeepNodeStatus(old, nodes[i]);
    } else if (nodes[i].drain_deadline &&
               nodes[i].state != NodeState::kDraining) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".drain_deadline: only a DRAINING node has one"));
    } else {
      // What only the scheduler and node agents set starts clear.
      nodes[i].state_source = NodeStateSource::kOperator;
      nodes[i].unhealthy_gpu_mask = 0;
      nodes[i].unhealthy_gpus_reason.clear();
    }
  }
  fleet_.Upsert(nodes);
  BumpEpoch();
  for (const Node& node : nodes) {
    if (node.drain_deadline) {
      deadlines_.AddDrain(*node.drain_deadline, node.spec.id);
    }
    if (now != absl::InfinitePast()) deadlines_.HeardIfNew(node.spec.id, now);
    log_.PutNode(node.spec.id);
  }
  return nodes;
}

// Changes a node's state. UNHEALTHY repairs its gangs (moves only their
// pods on the node, keeping every topology constraint; event REPAIRED) or
// evicts and requeues them (event EVICTED). A `drain_deadline` is for
// DRAINING only (InvalidArgument otherwise): gangs still on the node at
// that time are repaired or evicted alike. Any other state clears it.
absl::StatusOr<Node> Scheduler::SetNodeState(
    const NodeId& id, NodeState state, absl::string_view reason, absl::Time now,
    std::optional<absl::Time> drain_deadline, NodeStateSource source) {
  const int slot = fleet_.Find(id);
  if (slot < 0) return NoNode(id);
  RETURN_IF_ERROR(ValidateMessage(reason, config_.limits, "reason"));
  if (drain_deadline && state != NodeState::kDraining) {
    return absl::InvalidArgumentError(
        absl::StrCat("drain_deadline: only a DRAINING node takes one, not ",
                     NodeStateName(state)));
  }
  MarkNode(slot, state, reason, drain_deadline, source);
  if (state == NodeState::kUnhealthy) {
    NodeVacator(*this, now).Vacate({slot}, NodeVacator::Cause::kUnhealthy);
  }
  if (state == NodeState::kReady) BumpEpoch();
  return fleet_.slots()[slot].node;
}

// Applies a node agent's health check. The GPUs it names replace the
// node's unhealthy set (each 0..gpu_count-1, once); pods on newly
// unhealthy GPUs are repaired or evicted. A failed check makes a READY
// node UNHEALTHY (source NODE_AGENT; its gangs repaired or evicted); a
// passing one makes a node a node agent made UNHEALTHY READY again. Any
// other state (a cordon, a drain, an operator's or a heartbeat timeout's
// UNHEALTHY) is left as it is.
absl::StatusOr<Node> Scheduler::ReportNodeHealth(const NodeHealthReport& report,
                                                 absl::Time now) {
  const int slot = fleet_.Find(report.node_id);
  if (slot < 0) return NoNode(report.node_id);
  RETURN_IF_ERROR(ValidateMessage(report.reason, config_.limits, "reason"));
  ASSIGN_OR_RETURN(
      const uint64_t mask,
      GpuIndexMask(report.unhealthy_gpus,
                   fleet_.slots()[slot].node.spec.gpu_count, "unhealthy_gpus"));
  MarkGpus(slot, mask, report.reason, now);
  const Node& node = fleet_.slots()[slot].node;
  if (!report.healthy && node.state == NodeState::kReady) {
    MarkNode(slot, NodeState::kUnhealthy, report.reason, std::nullopt,
             NodeStateSource::kNodeAgent);
    NodeVacator(*this, now).Vacate({slot}, NodeVacator::Cause::kUnhealthy);
  } else if (report.healthy && node.state == NodeState::kUnhealthy &&
             node.state_source == NodeStateSource::kNodeAgent) {
    MarkNode(slot, NodeState::kReady, report.reason, std::nullopt,
             NodeStateSource::kNodeAgent);
    BumpEpoch();
  }
  return fleet_.slots()[slot].node;
}

// Removes a node that holds no gang.
absl::Status Scheduler::RemoveNode(const NodeId& id) {
  const int slot = fleet_.Find(id);
  if (slot < 0) return NoNode(id);
  const Fleet::Slot& s = fleet_.slots()[slot];
  if (!s.Idle()) {
    std::vector<std::string> holders;
    for (const GangPtr& gang : GangsOn(slot))
      holders.push_back(gang->id.value());
    return absl::FailedPreconditionError(absl::StrCat(
        "node_id: node ", QuoteForError(id.value()), " holds gangs ",
        absl::StrJoin(holders, ", "), "; drain it or mark it UNHEALTHY first"));
  }
  fleet_.Remove(id);
  deadlines_.Forget(id);
  log_.DeleteNode(id);
  return absl::OkStatus();
}

// Records heartbeats (kept in memory only). A node the scheduler made
// UNHEALTHY for want of heartbeats is READY again (its gangs were already
// moved off it).
absl::Status Scheduler::Heartbeat(const std::vector<NodeId>& ids,
                                  absl::Time now) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (fleet_.Find(ids[i]) < 0) {
      return absl::NotFoundError(absl::StrCat("node_ids[", i, "]: no node ",
                                              QuoteForError(ids[i].value())));
    }
  }
  for (const NodeId& id : ids) {
    deadlines_.Heard(id, now);
    const int slot = fleet_.Find(id);
    const Node& node = fleet_.slots()[slot].node;
    if (node.state == NodeState::kUnhealthy &&
        node.state_source == NodeStateSource::kHeartbeatTimeout) {
      MarkNode(slot, NodeState::kReady, "heartbeat resumed", std::nullopt,
               NodeStateSource::kHeartbeatTimeout);
      BumpEpoch();
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Admin commands.

// Creates or replaces a queue.
absl::StatusOr<Queue> Scheduler::PutQueue(Queue queue) {
  RETURN_IF_ERROR(ValidateQueue(queue, config_.limits, "queue"));
  if (!queue.parent.empty()) {
    if (quotas_.FindQueue(queue.parent) == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          "queue.parent: no queue ", QuoteForError(queue.parent.value())));
    }
    for (QueueName up = queue.parent; !up.empty();
         up = quotas_.queues().at(up).parent) {
      if (up == queue.name) {
        return absl::InvalidArgumentError(
            "queue.parent: would make a cycle of queues");
      }
    }
  }
  quotas_.PutQueue(queue);
  BumpEpoch();
  log_.PutQueue(queue.name);
  return queue;
}

// Deletes a queue without non-final gangs or children.
absl::Status Scheduler::DeleteQueue(const QueueName& name) {
  if (quotas_.FindQueue(name) == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("name: no queue ", QuoteForError(name.value())));
  }
  const QueueUsage usage = Usage(name);
  if (usage.pending + usage.active > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "name: queue ", QuoteForError(name.value()), " has ", usage.pending,
        " pending and ", usage.active, " active gangs"));
  }
  for (const auto& [child, queue] : quotas_.queues()) {
    if (queue.parent == name) {
      return absl::FailedPreconditionError(
          absl::StrCat("name: queue ", QuoteForError(name.value()),
                       " is the parent of ", QuoteForError(child.value())));
    }
  }
  quotas_.EraseQueue(name);
  log_.DeleteLedger(name);
  BumpEpoch();
  log_.DeleteQueue(name);
  return absl::OkStatus();
}

// Replaces the configuration; Aborted when `expected_version` is stale.
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
    // a new one a REQUIRED rack could span racks. The gang named is the
    // lowest id among them.
    const Gang* placed = nullptr;
    for (const auto& [id, gang] : gangs_.all()) {
      if (!HoldsCapacity(gang->state) || !UsesTopologyTree(gang->spec))
        continue;
      if (placed == nullptr || id < placed->id) placed = gang.get();
    }
    if (placed != nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "config.topology_levels: gang ", placed->id.value(), " is ",
          GangStateName(placed->state),
          " under a topology constraint placed on the current levels; change "
          "them when no such gang holds GPUs"));
    }
  }
  for (const auto& [id, gang] : gangs_.all()) {
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
  quotas_.SetFairShare(config_.fair_share);
  BumpEpoch();
  log_.PutConfig();
  return config_;
}

}  // namespace phalanx::core
