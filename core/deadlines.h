// Deadlines: the times something must happen without a command — a gang's
// max_runtime and start_timeout (and a PREEMPTING victim's grace period), a
// DRAINING node's drain deadline — and when each node was last heard from.
// Entries are checked lazily: a timer stays when its gang or node moves on,
// and whoever takes it checks it still applies.
//
// The only writer of timers and heartbeats. Owned by the Scheduler; not
// thread-safe.
#ifndef PHALANX_CORE_DEADLINES_H_
#define PHALANX_CORE_DEADLINES_H_

#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "core/model.h"

namespace phalanx::core {

class Deadlines {
 public:
  // Arms the max_runtime timer of an admitted `gang`, and its start
  // timeout while it is ADMITTED (when `start_timeout` > 0).
  void ArmGang(const Gang& gang, absl::Duration start_timeout);
  void AddGangTimer(absl::Time when, const GangId& gang);
  // The gangs whose timers are due at `now`, in time order (each timer
  // once; a gang may appear twice).
  std::vector<GangId> TakeDueGangs(absl::Time now);

  void AddDrain(absl::Time when, const NodeId& node);
  // The (deadline, node) drain timers due at `now`, in time order.
  std::vector<std::pair<absl::Time, NodeId>> TakeDueDrains(absl::Time now);

  // Records a heartbeat of `node` at `now`.
  void Heard(const NodeId& node, absl::Time now) { heartbeats_[node] = now; }
  // Records `now` for a node never heard from.
  void HeardIfNew(const NodeId& node, absl::Time now) {
    heartbeats_.try_emplace(node, now);
  }
  void Forget(const NodeId& node) { heartbeats_.erase(node); }
  std::optional<absl::Time> LastHeard(const NodeId& node) const;
  // How long `node` has been silent beyond `timeout` at `now` (a node never
  // heard from counts as heard now); nullopt while it is not.
  std::optional<absl::Duration> SilentFor(const NodeId& node, absl::Time now,
                                          absl::Duration timeout);

  // Notes when this process started (the first call wins).
  void Started(absl::Time now) {
    if (!started_at_) started_at_ = now;
  }
  // Whether `now` lies within `grace` of the start.
  bool InStartupGrace(absl::Time now, absl::Duration grace) const {
    return started_at_ && now < *started_at_ + grace;
  }

 private:
  // (when, gang): max_runtime and start_timeout deadlines.
  std::set<std::pair<absl::Time, GangId>> gang_timers_;
  // (when, node): drain deadlines.
  std::set<std::pair<absl::Time, NodeId>> drain_timers_;
  absl::flat_hash_map<NodeId, absl::Time> heartbeats_;
  std::optional<absl::Time> started_at_;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_DEADLINES_H_
