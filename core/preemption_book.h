// PreemptionBook: the preemptions under way — each PREEMPTING victim's
// preemptor and the end of its grace period, the nodes held for each
// preemptor while its victims stop — and the next time a pending gang may
// become a preemptor by time alone (a victim passing its min-runtime guard).
//
// The only writer of victims, holds and the wake-up time. Owned by the
// Scheduler; not thread-safe.
#ifndef PHALANX_CORE_PREEMPTION_BOOK_H_
#define PHALANX_CORE_PREEMPTION_BOOK_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/fleet.h"
#include "core/model.h"

namespace phalanx::core {

class PreemptionBook {
 public:
  struct Preemption {
    GangId preemptor;  // empty after a restart
    absl::Time deadline;
  };

  // Records that `victim` stops for `preemptor` by `deadline`.
  void AddVictim(const GangId& victim, const GangId& preemptor,
                 absl::Time deadline);
  // Forgets `victim` (it left PREEMPTING).
  void ForgetVictim(const GangId& victim) { preemptor_of_.erase(victim); }
  // The preemption `victim` is in, or null.
  const Preemption* VictimOf(const GangId& victim) const;
  // "REQUEUED: preempted by <preemptor>" (or without a name when unknown).
  std::string RequeuedReason(const GangId& victim) const;

  // Holds `node` for `preemptor`.
  void Hold(const GangId& preemptor, const NodeId& node);
  // Forgets the nodes held for `preemptor`; whether it held any.
  bool DropHolds(const GangId& preemptor);
  bool HoldsFor(const GangId& preemptor) const {
    return held_for_.contains(preemptor);
  }
  const std::map<GangId, std::set<NodeId>>& held_for() const {
    return held_for_;
  }
  // Moves whenever a hold is added or dropped.
  uint64_t hold_changes() const { return hold_changes_; }
  // Preemptors holding nodes none of whose victims is still stopping, in
  // id order.
  std::vector<GangId> ReadyPreemptors() const;
  // Whether the node at `slot` of `fleet` is held for a preemptor other
  // than `gang`.
  bool HeldForOther(int slot, const GangId& gang, const Fleet& fleet) const;
  // The slots of every held node still in `fleet` (unsorted, repeats kept).
  std::vector<int> HeldSlots(const Fleet& fleet) const;
  // Forgets the slot index of the holds (the fleet's slots may have moved).
  void ForgetSlots() { held_slots_.clear(); }

  // Notes that time alone may let a pending gang in at `when`.
  void WakeAt(absl::Time when) { wakeup_ = std::min(wakeup_, when); }
  // Whether that time has come (and forgets it).
  bool TakeWakeup(absl::Time now);

 private:
  std::map<GangId, Preemption> preemptor_of_;
  std::map<GangId, std::set<NodeId>> held_for_;
  // held_for_ by fleet slot, rebuilt on demand (empty: stale).
  mutable std::vector<std::vector<GangId>> held_slots_;
  uint64_t hold_changes_ = 0;
  absl::Time wakeup_ = absl::InfiniteFuture();
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_PREEMPTION_BOOK_H_
