#include "core/scheduler.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/admission_cycle.h"
#include "core/check.h"
#include "core/cycle_order.h"
#include "core/elastic.h"
#include "core/node_vacator.h"
#include "core/planner.h"
#include "core/spec_checks.h"
#include "core/status_macros.h"
#include "core/validate.h"

namespace phalanx::core {

bool Mutation::empty() const {
  return gangs_put.empty() && gangs_deleted.empty() && nodes_put.empty() &&
         ledger_put.empty() && ledger_deleted.empty() &&
         nodes_deleted.empty() && queues_put.empty() &&
         queues_deleted.empty() && !config.has_value() &&
         requests_put.empty() && requests_deleted.empty() && events.empty() &&
         trim_events_before == 0 && audit_put.empty() &&
         trim_audit_before == 0 && !startup_files.has_value();
}

namespace {

// The counters a damaged meta record could set past what later arithmetic
// (revision + 1, the retention window) can hold. 2^62 events is 146,000
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

absl::Status Refuse(absl::string_view why) {
  return absl::FailedPreconditionError(
      absl::StrCat("refusing to start: ", why));
}

// A stored record passed validation when it was written; one that no longer
// does (a damaged store) must not reach placement. Sizes are checked
// against the widest limits a config may set, so records stored under
// looser limits than today's still load.
const LimitsConfig& WidestLimits() {
  static const LimitsConfig kWidest = [] {
    LimitsConfig widest;
    widest.max_labels = 1024;
    widest.max_label_key_bytes = 1024;
    widest.max_label_value_bytes = 65536;
    widest.max_id_bytes = 4096;
    return widest;
  }();
  return kWidest;
}

// A waiting gang's shape passed validation when it was submitted; a
// damaged record (a pod set of 0 pods) would break placement's invariants.
// Only the shape is checked (not labels, ids or the queue's name, which do
// not reach placement).
absl::Status CheckStoredShape(const Gang& gang) {
  if (IsFinal(gang.state)) return absl::OkStatus();
  GangSpec shape = gang.spec;
  shape.labels.clear();
  shape.request_id.clear();
  shape.queue = QueueName("stored");
  return ValidateGangSpec(shape, WidestLimits(), "spec");
}

// A final gang may keep its last placement, released; nothing else holds a
// placement without holding its GPUs.
absl::Status CheckStoredPlacement(const Gang& gang) {
  const bool holds = HoldsCapacity(gang.state);
  const bool kept = IsFinal(gang.state) && gang.placement_released;
  if ((holds && gang.placement_released) ||
      (!kept && holds != !gang.placement.empty()) ||
      (holds && !HeldSizeAllowed(gang))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gang ", gang.id.value(), " is ", GangStateName(gang.state), " with ",
        gang.placement.size(), " of ", gang.spec.TotalPods(), " pods placed"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Restore(LoadedState state,
                                                              absl::Time now) {
  auto scheduler = std::make_unique<Scheduler>(state.config.value_or(Config{}));
  Scheduler& s = *scheduler;
  if (absl::Status st = CheckMeta(state.meta); !st.ok()) {
    return Refuse(st.message());
  }
  for (const Node& node : state.nodes) {
    if (absl::Status st = ValidateNodeSpec(node.spec, WidestLimits(), "node");
        !st.ok()) {
      return Refuse(st.message());
    }
    if (absl::Status st = s.fleet_.CheckUpsert(node.spec); !st.ok()) {
      return Refuse(
          absl::StrCat("node ", node.spec.id.value(), ": ", st.message()));
    }
    s.deadlines_.Heard(node.spec.id, now);
    if (node.drain_deadline) {
      s.deadlines_.AddDrain(*node.drain_deadline, node.spec.id);
    }
  }
  s.fleet_.Upsert(state.nodes);
  for (Queue& queue : state.queues) s.quotas_.PutQueue(std::move(queue));
  // The groups with a pending member whose stored reason is not NO_FIT;
  // every other group keeps any stamp (PendingGroup::keeps_any_stamp).
  absl::flat_hash_set<const PendingGroup*> restamp;
  for (Gang& gang : state.gangs) {
    // Placement requires the levels a waiting gang names to exist (Submit
    // and UpdateConfig keep it so; a damaged record need not).
    for (size_t i = 0; i < gang.spec.pod_sets.size() && !IsFinal(gang.state);
         ++i) {
      if (absl::Status st = CheckLevels(s.fleet_, gang.spec.pod_sets[i],
                                        absl::StrCat("pod_sets[", i, "]"));
          !st.ok()) {
        return Refuse(
            absl::StrCat("gang ", gang.id.value(), ": ", st.message()));
      }
    }
    if (gang.reason_code == ReasonCode::kNone && !gang.reason.empty()) {
      gang.reason_code = ReasonCodeOfStoredText(gang.reason);
    }
    if (absl::Status st = CheckStoredShape(gang); !st.ok()) {
      return Refuse(absl::StrCat("gang ", gang.id.value(), ": ", st.message()));
    }
    if (s.quotas_.FindQueue(gang.spec.queue) == nullptr &&
        !IsFinal(gang.state)) {
      return Refuse(absl::StrCat("gang ", gang.id.value(),
                                 " is in unknown queue ",
                                 gang.spec.queue.value()));
    }
    if (absl::Status st = CheckStoredPlacement(gang); !st.ok()) {
      return Refuse(st.message());
    }
    const bool holds = HoldsCapacity(gang.state);
    if (gang.state == GangState::kPreempting && !gang.grace_deadline) {
      // A record from before grace_deadline existed: a fresh grace period.
      gang.grace_deadline = now + s.config_.preemption.grace_period;
    }
    GangPtr stored = s.Put(std::move(gang));
    if (holds) {
      // (A refused restore drops the scheduler whole: no undo is needed.)
      if (absl::Status st = s.fleet_.Allocate(
              *stored, s.gangs_.HandleOf(stored->id), stored->placement);
          !st.ok()) {
        return Refuse(st.message());
      }
      s.quotas_.Charge(*stored, s.fleet_, +1);
      s.deadlines_.ArmGang(*stored, s.config_.start_timeout);
    }
    if (stored->state == GangState::kPreempting) {
      // The deadline the launcher was told (its GPUs are taken then).
      const absl::Time deadline = *stored->grace_deadline;
      s.preemptions_.AddVictim(stored->id, GangId(), deadline);
      s.deadlines_.AddGangTimer(deadline, stored->id);
    }
    if (stored->state == GangState::kPending &&
        stored->reason_code != ReasonCode::kNoFit) {
      restamp.insert(s.gangs_.pending().GroupOf(s.gangs_.HandleOf(stored->id)));
    }
  }
  for (auto& [key, group] : s.gangs_.pending().groups()) {
    group.keeps_any_stamp = !restamp.contains(&group);
  }
  // Launchers could not renew their leases while the daemon was down: none
  // lapses during the start-up grace (as no node heartbeat times out then),
  // those of gangs admitted meanwhile included.
  if (s.gangs_.leases().size() > 0) {
    s.gangs_.leases().set_not_before(now + s.config_.startup_grace);
  }
  for (RequestRecord& record : state.requests) {
    s.requests_.Put(std::move(record));
  }
  for (auto& [queue, entry] : state.ledger) {
    s.quotas_.ledger().Restore(queue, std::move(entry));
  }
  s.deadlines_.Started(now);
  s.log_.Restore(state.meta);
  // Nothing loaded needs writing back.
  s.log_.Clear();
  return scheduler;
}

void Scheduler::RunCycle(absl::Time now) { AdmissionCycle(*this, now).Run(); }

void Scheduler::UpdatePlan(absl::Time now) { Planner(*this, now).Run(); }

Mutation Scheduler::TakeMutation() {
  return log_.Take(fleet_, quotas_.queues(), config_, quotas_.ledger());
}

// ---------------------------------------------------------------------------
// Reads.

GangTable::Records Scheduler::gangs() const { return gangs_.all(); }

std::vector<GangPtr> Scheduler::GangsOn(int slot) const {
  std::vector<GangPtr> on;
  for (const Fleet::GangPods& pods : fleet_.slots()[slot].gang_pods) {
    // A gang holds a node only while its record is stored (Erase takes
    // only final gangs, whose GPUs were released).
    on.push_back(gangs_.At(pods.gang));
    PHALANX_CHECK(on.back() != nullptr);
  }
  std::sort(on.begin(), on.end(),
            [](const GangPtr& a, const GangPtr& b) { return a->id < b->id; });
  return on;
}

std::optional<absl::Time> Scheduler::LastHeartbeat(const NodeId& id) const {
  return deadlines_.LastHeard(id);
}

const absl::btree_map<QueueName, Queue>& Scheduler::queues() const {
  return quotas_.queues();
}

const std::vector<Reservation>& Scheduler::reservations() const {
  return reservations_.all();
}

const std::map<GangId, std::set<NodeId>>& Scheduler::held_for() const {
  return preemptions_.held_for();
}

QueueUsage Scheduler::Usage(const QueueName& name) const {
  QueueUsage usage;
  usage.held_gpus = quotas_.Held(name);
  std::tie(usage.pending, usage.active) = gangs_.PendingAndActive(name);
  return usage;
}

absl::StatusOr<Explanation> Scheduler::Explain(const GangId& id,
                                               absl::Time now) const {
  GangPtr gang = FindGang(id);
  if (gang == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("gang_id: no gang ", QuoteForError(id.value())));
  }
  Explanation explanation;
  explanation.gang = gang;
  explanation.plan = PlanOf(id);
  if (gang->state != GangState::kPending) return explanation;
  explanation.reason_code = gang->reason_code;
  explanation.reason = gang->reason;
  // Where it stands in the order a cycle at `now` would consider pending
  // gangs.
  CycleOrder order(gangs_, quotas_, config_.admission, capacity_epoch_, nullptr,
                   now);
  for (auto offer = order.Next(); offer.gang != nullptr; offer = order.Next()) {
    ++explanation.position;
    if (offer.gang->spec.queue == gang->spec.queue) {
      ++explanation.position_in_queue;
    }
    if (offer.gang->id == id) break;
    order.Advance(false);
  }
  if (const Reservation* held = reservations_.Of(id)) {
    explanation.reservation = *held;
  }
  return explanation;
}

PlannedStart Scheduler::PlanOf(const GangId& id) const {
  const GangPtr gang = gangs_.Find(id);
  if (gang == nullptr || gang->state != GangState::kPending) {
    PlannedStart none;
    none.status = PlanStatus::kNotPending;
    return none;
  }
  return plan_.Of(id);
}

absl::Status PutQueuesParentsFirst(Scheduler& scheduler,
                                   std::vector<Queue> queues) {
  while (!queues.empty()) {
    std::vector<Queue> retry;
    absl::Status last;
    for (Queue& queue : queues) {
      auto held = scheduler.queues().find(queue.name);
      if (held != scheduler.queues().end() && held->second == queue) continue;
      absl::Status status = scheduler.PutQueue(queue).status();
      if (absl::IsNotFound(status)) {
        last = status;
        retry.push_back(std::move(queue));
      } else if (!status.ok()) {
        return absl::Status(status.code(),
                            absl::StrCat("queue \"", queue.name.value(),
                                         "\": ", status.message()));
      }
    }
    if (retry.size() == queues.size()) return last;
    queues = std::move(retry);
  }
  return absl::OkStatus();
}

}  // namespace phalanx::core
