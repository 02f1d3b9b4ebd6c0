#include "core/planner.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "core/cycle_order.h"
#include "core/elastic.h"

namespace phalanx::core {

absl::Duration PlannedRuntime(const Gang& gang, absl::Duration fallback) {
  if (gang.spec.estimated_runtime > absl::ZeroDuration()) {
    const int set = ElasticSetOf(gang.spec);
    return set < 0 ? gang.spec.estimated_runtime
                   : RuntimeAtSize(gang.spec, HeldCount(gang, set),
                                   gang.spec.estimated_runtime);
  }
  if (gang.spec.max_runtime > absl::ZeroDuration()) {
    return gang.spec.max_runtime;
  }
  return fallback;
}

absl::Time BackfillEnd(const Gang& gang, absl::Time now) {
  const absl::Duration runtime = PlannedRuntime(gang, absl::InfiniteDuration());
  return runtime == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                             : now + runtime;
}

void Planner::Run() {
  const PlanningConfig& config = s_.config_.planning;
  if (config.max_gangs <= 0) {
    if (s_.plan_.made()) {
      s_.plan_.Clear();
      s_.fits_.ForgetRestricted();
      s_.BumpEpoch();
    }
    s_.plan_arrivals_.clear();
    return;
  }
  if (Due()) {
    Replan();
  } else {
    PlanArrivals();
  }
}

bool Planner::Due() const {
  const Plan& plan = s_.plan_;
  return !plan.MadeFor(s_.fleet_) || !(plan.config() == s_.config_.planning) ||
         plan.made_at() == absl::InfinitePast() ||
         now_ >= plan.made_at() + s_.config_.planning.interval;
}

std::vector<Plan::Running> Planner::RunningGangs() const {
  const Fleet& fleet = s_.fleet_;
  absl::flat_hash_set<GangHandle> seen;
  std::vector<Plan::Running> running;
  const absl::Duration fallback = s_.config_.planning.default_runtime;
  // A gang past its expected end is expected to end within a cycle.
  const absl::Time soonest = now_ + s_.config_.cycle_interval;
  for (const Fleet::Slot& slot : fleet.slots()) {
    for (const Fleet::GangPods& on : slot.gang_pods) {
      if (!seen.insert(on.gang).second) continue;
      const Gang* gang = s_.gangs_.Peek(on.gang);
      if (gang == nullptr) continue;
      absl::Time end = absl::InfiniteFuture();
      // A shrinking gang keeps running (on fewer pods); the plan counts all
      // of them until the shrink is done.
      if (gang->state == GangState::kPreempting && gang->grace_deadline &&
          gang->shrink_to == 0) {
        end = *gang->grace_deadline;
      } else if (gang->admit_time) {
        end = IsElastic(gang->spec) &&
                      gang->spec.estimated_runtime > absl::ZeroDuration()
                  ? ElasticEnd(*gang, gang->spec.estimated_runtime)
                  : *gang->admit_time + PlannedRuntime(*gang, fallback);
      }
      running.push_back({gang, std::max(end, soonest)});
    }
  }
  return running;
}

void Planner::Replan() {
  s_.plan_.Reset(s_.fleet_, RunningGangs(), now_, s_.config_.planning);
  s_.plan_arrivals_.clear();
  CycleOrder order(s_.gangs_, s_.quotas_, s_.config_.admission,
                   s_.capacity_epoch_, nullptr, now_);
  for (auto offer = order.Next(); offer.gang != nullptr && !s_.plan_.full();
       offer = order.Next()) {
    PlanGang(*offer.gang);
    order.Advance(false);
  }
  s_.fits_.ForgetRestricted();
  if (s_.config_.planning.binding) s_.BumpEpoch();
}

void Planner::PlanArrivals() {
  std::vector<GangId> arrivals = std::move(s_.plan_arrivals_);
  s_.plan_arrivals_.clear();
  const size_t binding_before = s_.plan_.BindingSlots().size();
  for (const GangId& id : arrivals) {
    if (s_.plan_.full()) break;
    const Gang* gang = s_.gangs_.Peek(id);
    if (gang == nullptr || gang->state != GangState::kPending ||
        s_.plan_.Of(id).status != PlanStatus::kUnplanned) {
      continue;
    }
    PlanGang(*gang);
  }
  if (s_.plan_.BindingSlots().size() != binding_before) {
    s_.fits_.ForgetRestricted();
  }
}

void Planner::PlanGang(const Gang& gang) {
  Plan::Request request;
  request.gang = &gang;
  request.runtime = PlannedRuntime(gang, s_.config_.planning.default_runtime);
  // An elastic gang is planned at its minimum size, for as long as its work
  // takes at that size.
  Gang minimum;
  if (const int set = ElasticSetOf(gang.spec); set >= 0) {
    minimum = gang;
    minimum.spec = MinimumSpec(gang.spec);
    request.gang = &minimum;
    request.runtime = RuntimeAtSize(
        gang.spec, MinCountOf(gang.spec.pod_sets[set]), request.runtime);
  }
  // A gang its quota or a hold refuses may not start when capacity frees:
  // it is planned (its estimate) without holding capacity from others
  // (one that reserved under reservation.for_quota_waits holds it).
  request.binding = gang.reason_code != ReasonCode::kQuota &&
                    gang.reason_code != ReasonCode::kQueueHeld &&
                    gang.reason_code != ReasonCode::kPreempting;
  std::vector<int> reserved;
  if (const Reservation* r = s_.reservations_.Of(gang.id)) {
    reserved = ReservationBook::SlotsOf(*r, s_.fleet_);
    std::sort(reserved.begin(), reserved.end());
    request.only_slots = &reserved;
  }
  s_.plan_.Add(request, s_.fleet_, now_);
}

}  // namespace phalanx::core
