#include "core/scheduler_state.h"

#include <utility>

#include "core/check.h"
#include "core/elastic.h"
#include "core/node_vacator.h"
#include "core/planner.h"

namespace phalanx::core {

SchedulerState::SchedulerState(Config config)
    : config_(std::move(config)),
      fleet_(config_.topology_levels),
      quotas_(config_.fair_share) {
  log_.PutConfig();
}

GangPtr SchedulerState::Put(Gang gang) {
  GangTable::PutResult put = gangs_.Put(std::move(gang));
  const GangId& id = put.gang->id;
  const GangState state = put.gang->state;
  // Its reservation, if any, goes at the next cycle.
  if (put.left_pending && reservations_.Of(id) != nullptr) BumpEpoch();
  if (put.left_pending) plan_.Drop(id);
  if (state != GangState::kPending) DropHolds(id);  // admitted or finished
  if (state != GangState::kPreempting) preemptions_.ForgetVictim(id);
  if (IsElastic(put.gang->spec)) {
    ++elastic_version_;
    if (HoldsCapacity(state)) {
      elastic_.insert(id);
    } else {
      elastic_.erase(id);
    }
  }
  log_.PutGang(put.gang);
  return put.gang;
}

GangPtr SchedulerState::Transition(Gang gang, EventType type, absl::Time now) {
  gang.revision = log_.NextRevision();
  GangPtr ptr = Put(std::move(gang));
  if (ptr->state == GangState::kPending && type != EventType::kReserved &&
      plan_.made()) {
    // More arrivals than a plan holds are planned by making it again.
    if (plan_arrivals_.size() <
        static_cast<size_t>(config_.planning.max_gangs)) {
      plan_arrivals_.push_back(ptr->id);
    } else {
      plan_.MarkStale();
    }
  }
  log_.Record(Event{ptr->revision, type, now, ptr});
  return ptr;
}

// Pending gangs may now fit, so the capacity epoch moves. The placement
// stays on the record, released (Put clears it when the gang goes back to
// PENDING, keeps it when the gang is final).
void SchedulerState::ReleaseCapacity(Gang& gang, absl::Time now) {
  if (!HoldsCapacity(gang.state)) return;
  if (gang.admit_time) gang.previous_run_time += now - *gang.admit_time;
  quotas_.Accrue(gang.spec.queue, now);
  quotas_.Charge(gang, fleet_, -1);
  BumpEpoch();
  fleet_.Release(gang, gangs_.HandleOf(gang.id), gang.placement);
  gang.placement_released = true;
  gang.on_loan = false;  // a loan lasts one attempt
}

void SchedulerState::Admit(const GangPtr& gang, std::vector<PodPlacement> pods,
                           absl::Time now, bool on_loan) {
  Gang admitted = *gang;
  admitted.placement = std::move(pods);
  admitted.on_loan = on_loan;
  PHALANX_CHECK(
      fleet_.Allocate(admitted, gangs_.HandleOf(gang->id), admitted.placement)
          .ok());
  admitted.state = GangState::kAdmitted;
  admitted.reason_code = ReasonCode::kNone;
  admitted.reason.clear();
  admitted.admit_time = now;
  admitted.elastic_work_done = absl::ZeroDuration();  // a new attempt
  if (!admitted.first_admit_time) admitted.first_admit_time = now;
  if (admitted.spec.lease_duration > absl::ZeroDuration()) {
    admitted.lease_expire_time = now + admitted.spec.lease_duration;
  }
  ++admitted.attempts;
  quotas_.Accrue(admitted.spec.queue, now);
  quotas_.Charge(admitted, fleet_, +1);
  deadlines_.ArmGang(admitted, config_.start_timeout);
  const absl::Time expected_end =
      now + PlannedRuntime(admitted, config_.planning.default_runtime);
  const GangPtr stored =
      Transition(std::move(admitted), EventType::kAdmitted, now);
  plan_.TakeCapacity(stored->placement, fleet_, now, expected_end);
}

GangPtr SchedulerState::Resize(Gang gang, std::vector<PodPlacement> pods,
                               absl::Time now) {
  const GangHandle handle = gangs_.HandleOf(gang.id);
  gang.elastic_work_done += WorkSinceResize(gang, now);  // at the old size
  quotas_.Accrue(gang.spec.queue, now);
  quotas_.Charge(gang, fleet_, -1);
  fleet_.Release(gang, handle, gang.placement);
  gang.placement = std::move(pods);
  PHALANX_CHECK(fleet_.Allocate(gang, handle, gang.placement).ok());
  quotas_.Charge(gang, fleet_, +1);
  gang.last_resize_time = now;
  ++gang.resizes;
  BumpEpoch();
  plan_.MarkStale();  // the running gangs' capacity changed
  return Transition(std::move(gang), EventType::kResized, now);
}

void SchedulerState::SetReason(const GangPtr& gang, ReasonCode code,
                               std::string reason) {
  if (gang->reason_code == code && gang->reason == reason) return;
  Gang copy = *gang;
  copy.reason_code = code;
  copy.reason = std::move(reason);
  if (gang->state == GangState::kPending) {
    const GangHandle handle = gangs_.HandleOf(gang->id);
    PendingGroup* group = gangs_.pending().GroupOf(handle);
    if (group != nullptr &&
        (group->keeps_any_stamp || group->stamped != copy.reason)) {
      group->Unstamp(handle);
    }
    // The stored record of a pending gang, with only its reason new: no
    // index keeps changes (its group, counts, holds, leases and timers stay
    // as they are), so only the record is replaced.
    if (GangPtr stored = gangs_.ReplacePending(gang, std::move(copy))) {
      log_.PutGang(stored);
      return;
    }
  }
  Put(std::move(copy));
}

void SchedulerState::RequeueVictim(Gang& victim, absl::Time now) {
  victim.reason_code = ReasonCode::kRequeued;
  victim.reason = preemptions_.RequeuedReason(victim.id);
  ++victim.preemptions;
  ReleaseCapacity(victim, now);
  victim.state = GangState::kPending;
}

void SchedulerState::FinishPreemption(Gang victim, absl::Time now) {
  RequeueVictim(victim, now);
  Transition(std::move(victim), EventType::kRequeued, now);
}

void SchedulerState::DeleteGang(const GangId& id) {
  gangs_.Erase(id);
  log_.DeleteGang(id);
}

void SchedulerState::BumpEpoch() {
  ++capacity_epoch_;
  preemptions_.ForgetSlots();  // slots may have moved
  fits_.ForgetRestricted();
}

void SchedulerState::DropHolds(const GangId& preemptor) {
  if (!preemptions_.DropHolds(preemptor)) return;
  fits_.ForgetRestricted();
  BumpEpoch();  // the held nodes are free for others again
}

void SchedulerState::MarkNode(int slot, NodeState state,
                              absl::string_view reason,
                              std::optional<absl::Time> drain_deadline,
                              NodeStateSource source) {
  Node node = fleet_.slots()[slot].node;
  node.state = state;
  node.state_source = source;
  node.state_reason = std::string(reason);
  node.drain_deadline = drain_deadline;
  if (drain_deadline) deadlines_.AddDrain(*drain_deadline, node.spec.id);
  log_.PutNode(node.spec.id);
  fleet_.Upsert({std::move(node)});
}

void SchedulerState::MarkGpus(int slot, uint64_t unhealthy_mask,
                              absl::string_view reason, absl::Time now) {
  Node node = fleet_.slots()[slot].node;
  const uint64_t newly_bad = unhealthy_mask & ~node.unhealthy_gpu_mask;
  const bool returned = (node.unhealthy_gpu_mask & ~unhealthy_mask) != 0;
  node.unhealthy_gpu_mask = unhealthy_mask;
  node.unhealthy_gpus_reason = unhealthy_mask == 0 ? "" : std::string(reason);
  if (node == fleet_.slots()[slot].node) return;
  log_.PutNode(node.spec.id);
  fleet_.Upsert({std::move(node)});
  if (newly_bad != 0) NodeVacator(*this, now).VacateUnhealthyGpus(slot);
  if (returned) BumpEpoch();
}

PlacementOptions SchedulerState::OptionsFor(const Queue& queue) const {
  PlacementOptions options;
  options.first_fit = config_.placement.first_fit;
  options.model_gate = [this, &queue](const std::string& model, int64_t gpus) {
    return quotas_.QuotaReason(queue, model, gpus);
  };
  return options;
}

const std::vector<int>& SchedulerState::RestrictedSlots() {
  return fits_.RestrictedSlots(reservations_, preemptions_, plan_, fleet_);
}

}  // namespace phalanx::core
