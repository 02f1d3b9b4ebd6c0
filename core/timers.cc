// Lifecycle timers and gang leases (docs/design.md §3) and node liveness
// (docs/design.md §6): a crashed launcher or a dead node cannot hold GPUs
// forever.
#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/scheduler.h"

namespace phalanx::core {

void Scheduler::ArmTimers(const Gang& gang) {
  if (!gang.admit_time) return;
  if (gang.spec.max_runtime > absl::ZeroDuration()) {
    timers_.insert({*gang.admit_time + gang.spec.max_runtime, gang.id});
  }
  if (config_.start_timeout > absl::ZeroDuration() &&
      gang.state == GangState::kAdmitted) {
    timers_.insert({*gang.admit_time + config_.start_timeout, gang.id});
  }
}

void Scheduler::ExpireTimers(absl::Time now) {
  while (!timers_.empty() && timers_.begin()->first <= now) {
    const GangId id = timers_.begin()->second;
    timers_.erase(timers_.begin());
    GangPtr current = FindGang(id);
    // Timers are not removed when a gang moves on: check it still applies.
    if (current == nullptr || !HoldsCapacity(current->state) ||
        !current->admit_time) {
      continue;
    }
    if (current->state == GangState::kPreempting) {
      auto it = preemptor_of_.find(id);
      if (it == preemptor_of_.end() || it->second.deadline <= now) {
        FinishPreemption(*current, now);
      }
      continue;
    }
    const absl::Time admitted = *current->admit_time;
    const absl::Duration max_runtime = current->spec.max_runtime;
    Gang gang = *current;
    if (max_runtime > absl::ZeroDuration() && admitted + max_runtime <= now) {
      ReleaseCapacity(gang, now);
      gang.state = GangState::kFailed;
      gang.reason = "MAX_RUNTIME";
      gang.message = absl::StrCat("ran longer than max_runtime ",
                                  absl::FormatDuration(max_runtime));
      gang.finish_time = now;
      Transition(std::move(gang), EventType::kFailed, now);
    } else if (gang.state == GangState::kAdmitted &&
               config_.start_timeout > absl::ZeroDuration() &&
               admitted + config_.start_timeout <= now) {
      ReleaseCapacity(gang, now);
      gang.state = GangState::kPending;
      gang.reason = absl::StrCat("REQUEUED: not reported RUNNING within ",
                                 absl::FormatDuration(config_.start_timeout));
      Transition(std::move(gang), EventType::kRequeued, now);
    }
  }
}

void Scheduler::ExpireLeases(absl::Time now) {
  for (const GangId& id : leases_.TakeLapsed(now)) {
    GangPtr current = FindGang(id);
    // The table holds exactly the leased gangs that hold GPUs (Put keeps it
    // so), each with its current expiry.
    PHALANX_CHECK(current != nullptr && HoldsCapacity(current->state) &&
                  current->lease_expire_time.has_value());
    Gang gang = *current;
    ReleaseCapacity(gang, now);
    gang.state = GangState::kFailed;
    gang.reason = "LEASE_EXPIRED";
    gang.message =
        absl::StrCat("lease not renewed since ",
                     absl::FormatTime(*current->lease_expire_time -
                                          current->spec.lease_duration,
                                      absl::UTCTimeZone()),
                     " (lease_duration ",
                     absl::FormatDuration(current->spec.lease_duration), ")");
    gang.finish_time = now;
    Transition(std::move(gang), EventType::kFailed, now);
  }
}

void Scheduler::CheckHeartbeats(absl::Time now) {
  if (!started_at_) started_at_ = now;
  const absl::Duration timeout = config_.heartbeat_timeout;
  if (timeout <= absl::ZeroDuration() ||
      now < *started_at_ + config_.startup_grace) {
    return;
  }
  // Every silent node is marked first, so that no repair moves pods onto a
  // node that is about to be found dead too.
  std::vector<int> dead;
  for (int slot = 0; slot < static_cast<int>(fleet_.slots().size()); ++slot) {
    const Node& node = fleet_.slots()[slot].node;
    if (node.state == NodeState::kUnhealthy) continue;
    auto [it, fresh] = heartbeats_.try_emplace(node.spec.id, now);
    if (fresh || it->second + timeout >= now) continue;
    MarkNode(slot, NodeState::kUnhealthy,
             absl::StrCat("no heartbeat for ",
                          absl::FormatDuration(now - it->second)),
             std::nullopt);
    dead.push_back(slot);
  }
  if (!dead.empty()) VacateNodes(dead, VacateCause::kUnhealthy, now);
}

}  // namespace phalanx::core
