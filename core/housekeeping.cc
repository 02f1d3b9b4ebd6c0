#include "core/housekeeping.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/node_vacator.h"
#include "core/resizer.h"

namespace phalanx::core {

void Housekeeping::Run() {
  ExpireAndTrim();
  s_.quotas_.Sample(now_);
  ExpireTimers();
  ExpireLeases();
  CheckHeartbeats();
  ExpireDrains();
}

void Housekeeping::ExpireAndTrim() {
  for (RequestRecord& record : s_.requests_.TakeExpired(now_)) {
    const GangId gang = record.gang_id;
    s_.log_.DeleteRequest(
        {std::move(record.queue), std::move(record.request_id)});
    // Retention already let the gang go; only its key kept it.
    if (s_.gangs_.DropTombstone(gang)) s_.DeleteGang(gang);
  }
  // A retried submit, get or cancel must still find the gang its live
  // request key names: it stays, out of retention's count, until the key
  // expires.
  const RequestKeys& requests = s_.requests_;
  for (const GangId& id : s_.gangs_.Retire(s_.config_.retention, now_,
                                           [&requests](const Gang& gang) {
                                             return requests.NamesGang(gang);
                                           })) {
    s_.DeleteGang(id);
  }
  s_.log_.TrimEvents(s_.config_.retention.events);
}

void Housekeeping::ExpireTimers() {
  const absl::Duration start_timeout = s_.config_.start_timeout;
  for (const GangId& id : s_.deadlines_.TakeDueGangs(now_)) {
    GangPtr current = s_.gangs_.Find(id);
    // Timers are not removed when a gang moves on: check it still applies.
    if (current == nullptr || !HoldsCapacity(current->state) ||
        !current->admit_time) {
      continue;
    }
    if (current->state == GangState::kPreempting) {
      const PreemptionBook::Preemption* preemption =
          s_.preemptions_.VictimOf(id);
      if (preemption == nullptr || preemption->deadline <= now_) {
        if (current->shrink_to > 0) {
          Resizer(s_, now_).FinishShrink(*current);
        } else {
          s_.FinishPreemption(*current, now_);
        }
      }
      continue;
    }
    const absl::Time admitted = *current->admit_time;
    const absl::Duration max_runtime = current->spec.max_runtime;
    Gang gang = *current;
    if (max_runtime > absl::ZeroDuration() && admitted + max_runtime <= now_) {
      s_.ReleaseCapacity(gang, now_);
      gang.state = GangState::kFailed;
      gang.reason_code = ReasonCode::kMaxRuntime;
      gang.reason = "MAX_RUNTIME";
      gang.message = absl::StrCat("ran longer than max_runtime ",
                                  absl::FormatDuration(max_runtime));
      gang.finish_time = now_;
      s_.Transition(std::move(gang), EventType::kFailed, now_);
    } else if (gang.state == GangState::kAdmitted &&
               start_timeout > absl::ZeroDuration() &&
               admitted + start_timeout <= now_) {
      s_.ReleaseCapacity(gang, now_);
      gang.state = GangState::kPending;
      gang.reason_code = ReasonCode::kStartTimeout;
      gang.reason = absl::StrCat("REQUEUED: not reported RUNNING within ",
                                 absl::FormatDuration(start_timeout));
      s_.Transition(std::move(gang), EventType::kRequeued, now_);
    }
  }
}

void Housekeeping::ExpireLeases() {
  for (const GangId& id : s_.gangs_.leases().TakeLapsed(now_)) {
    GangPtr current = s_.gangs_.Find(id);
    // The table holds exactly the leased gangs that hold GPUs (Put keeps it
    // so), each with its current expiry.
    PHALANX_CHECK(current != nullptr && HoldsCapacity(current->state) &&
                  current->lease_expire_time.has_value());
    Gang gang = *current;
    s_.ReleaseCapacity(gang, now_);
    gang.state = GangState::kFailed;
    gang.reason_code = ReasonCode::kLeaseExpired;
    gang.reason = "LEASE_EXPIRED";
    gang.message =
        absl::StrCat("lease not renewed since ",
                     absl::FormatTime(*current->lease_expire_time -
                                          current->spec.lease_duration,
                                      absl::UTCTimeZone()),
                     " (lease_duration ",
                     absl::FormatDuration(current->spec.lease_duration), ")");
    gang.finish_time = now_;
    s_.Transition(std::move(gang), EventType::kFailed, now_);
  }
}

void Housekeeping::CheckHeartbeats() {
  Deadlines& deadlines = s_.deadlines_;
  deadlines.Started(now_);
  const absl::Duration timeout = s_.config_.heartbeat_timeout;
  if (timeout <= absl::ZeroDuration() ||
      deadlines.InStartupGrace(now_, s_.config_.startup_grace)) {
    return;
  }
  // Every silent node is marked first, so that no repair moves pods onto a
  // node that is about to be found dead too.
  std::vector<int> dead;
  const Fleet& fleet = s_.fleet_;
  for (int slot = 0; slot < static_cast<int>(fleet.slots().size()); ++slot) {
    const Node& node = fleet.slots()[slot].node;
    if (node.state == NodeState::kUnhealthy) continue;
    const auto silent = deadlines.SilentFor(node.spec.id, now_, timeout);
    if (!silent) continue;
    s_.MarkNode(
        slot, NodeState::kUnhealthy,
        absl::StrCat("no heartbeat for ", absl::FormatDuration(*silent)),
        std::nullopt, NodeStateSource::kHeartbeatTimeout);
    dead.push_back(slot);
  }
  if (!dead.empty()) {
    NodeVacator(s_, now_).Vacate(dead, NodeVacator::Cause::kUnhealthy);
  }
}

void Housekeeping::ExpireDrains() {
  std::vector<int> due;
  for (const auto& [when, id] : s_.deadlines_.TakeDueDrains(now_)) {
    // Timers are not removed when a node changes: check it still applies.
    const int slot = s_.fleet_.Find(id);
    if (slot < 0) continue;
    const Node& node = s_.fleet_.slots()[slot].node;
    if (node.state == NodeState::kDraining && node.drain_deadline == when) {
      due.push_back(slot);
    }
  }
  if (!due.empty()) {
    NodeVacator(s_, now_).Vacate(due, NodeVacator::Cause::kDrainDeadline);
  }
}

}  // namespace phalanx::core
