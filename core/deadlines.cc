#include "core/deadlines.h"

namespace phalanx::core {

void Deadlines::ArmGang(const Gang& gang, absl::Duration start_timeout) {
  if (!gang.admit_time) return;
  if (gang.spec.max_runtime > absl::ZeroDuration()) {
    gang_timers_.insert({*gang.admit_time + gang.spec.max_runtime, gang.id});
  }
  if (start_timeout > absl::ZeroDuration() &&
      gang.state == GangState::kAdmitted) {
    gang_timers_.insert({*gang.admit_time + start_timeout, gang.id});
  }
}

void Deadlines::AddGangTimer(absl::Time when, const GangId& gang) {
  gang_timers_.insert({when, gang});
}

std::vector<GangId> Deadlines::TakeDueGangs(absl::Time now) {
  std::vector<GangId> due;
  while (!gang_timers_.empty() && gang_timers_.begin()->first <= now) {
    due.push_back(gang_timers_.begin()->second);
    gang_timers_.erase(gang_timers_.begin());
  }
  return due;
}

void Deadlines::AddDrain(absl::Time when, const NodeId& node) {
  drain_timers_.insert({when, node});
}

std::vector<std::pair<absl::Time, NodeId>> Deadlines::TakeDueDrains(
    absl::Time now) {
  std::vector<std::pair<absl::Time, NodeId>> due;
  while (!drain_timers_.empty() && drain_timers_.begin()->first <= now) {
    due.push_back(*drain_timers_.begin());
    drain_timers_.erase(drain_timers_.begin());
  }
  return due;
}

std::optional<absl::Time> Deadlines::LastHeard(const NodeId& node) const {
  auto it = heartbeats_.find(node);
  if (it == heartbeats_.end()) return std::nullopt;
  return it->second;
}

std::optional<absl::Duration> Deadlines::SilentFor(const NodeId& node,
                                                   absl::Time now,
                                                   absl::Duration timeout) {
  auto [it, fresh] = heartbeats_.try_emplace(node, now);
  if (fresh || it->second + timeout >= now) return std::nullopt;
  return now - it->second;
}

}  // namespace phalanx::core
