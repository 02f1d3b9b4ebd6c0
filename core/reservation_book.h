// ReservationBook: the reservations in force — which pending gang holds
// which nodes, from when it is expected to start — by fleet slot, and when
// they were last planned.
//
// The only writer of reservations: the cycle adds them (`Add`) and keeps or
// re-plans them (`KeepOrReplan`); everyone else reads. Owned by the
// Scheduler; not thread-safe.
#ifndef PHALANX_CORE_RESERVATION_BOOK_H_
#define PHALANX_CORE_RESERVATION_BOOK_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/fleet.h"
#include "core/model.h"
#include "core/reservation.h"

namespace phalanx::core {

class GangTable;

class ReservationBook {
 public:
  // Why a gang holding a reservation did not fit: the reason it waits for
  // once the reservation goes.
  struct Cause {
    ReasonCode code = ReasonCode::kNone;
    std::string reason;
  };

  // Reservations in force, in the order they were made.
  const std::vector<Reservation>& all() const { return reservations_; }
  bool empty() const { return reservations_.empty(); }
  int size() const { return static_cast<int>(reservations_.size()); }
  // The reservation `gang` holds, or null.
  const Reservation* Of(const GangId& gang) const;
  // The reservation holding the node at `slot`, or null.
  const Reservation* AtSlot(int slot) const {
    const int r = reserved_slot_[slot];
    return r < 0 ? nullptr : &reservations_[r];
  }
  // Per fleet slot: whether some reservation holds it.
  std::vector<char> TakenSlots() const;
  // Whether a gang of `priority` submitted at `submit_time` may make a new
  // reservation now (depth left, and priority or age enough).
  bool MayReserve(const ReservationConfig& config, int priority,
                  absl::Time submit_time, absl::Time now) const;
  // Records a new reservation (each node stays with the first holder).
  void Add(Reservation reservation, const Fleet& fleet);
  // When capacity changed since the last plan (`epoch` moved) or the fleet
  // was resized: re-plans from scratch at most every few seconds (keeping
  // only protected reservations, re-estimated), else re-estimates the kept ones
  // on their own domains, dropping those whose gang left PENDING, no longer
  // fits there, or starts beyond the window. Returns whether the reservations
  // may have changed.
  bool KeepOrReplan(const ReservationConfig& config, int64_t epoch,
                    Fleet& fleet, const GangTable& gangs, absl::Time now);
  // Notes that the reservations now stand for capacity epoch `epoch`.
  void PlannedAt(int64_t epoch) { planned_epoch_ = epoch; }
  // Records why `gang`, which holds a reservation, did not fit.
  void NoteCause(const GangId& gang, Cause cause);
  // Removes and returns the cause noted for `gang` (a default Cause when
  // none was); for a gang whose reservation went.
  Cause TakeCause(const GangId& gang);
  // Counts that `gang`, still PENDING, lost its reservation, whatever the
  // cause, when plan protection is on (ReservationConfig::max_takeovers).
  void NoteTakenOver(const ReservationConfig& config, const GangId& gang) {
    if (config.max_takeovers >= 0) ++takeovers_[gang];
  }

  // The slots of the nodes `reservation` holds (those still in `fleet`).
  static std::vector<int> SlotsOf(const Reservation& reservation,
                                  const Fleet& fleet);
  // Whether `reservation` starts within `config.window` of `now`.
  static bool WithinWindow(const ReservationConfig& config,
                           const Reservation& reservation, absl::Time now);
  // Whether `gang` may use nodes `reservation` holds: its own, or it is
  // expected to end before the reservation starts (backfill).
  static bool MayBackfill(const Gang& gang, const Reservation& reservation,
                          absl::Time now);

 private:
  void IndexSlots(const Fleet& fleet);
  // How many times `gang` lost a reservation while it stayed PENDING.
  int TakeoversOf(const GangId& gang) const;
  // Whether a full re-plan keeps the reservation of `gang` (PENDING; plan
  // protection).
  bool Protected(const ReservationConfig& config, const Gang& gang,
                 absl::Time now) const;
  // Whether a gang of `priority` submitted at `submit_time` is one that may
  // hold a reservation (priority or age enough), depth aside.
  static bool MayHoldReservation(const ReservationConfig& config, int priority,
                                 absl::Time submit_time, absl::Time now);
  // Forgets the takeover counts of gangs no longer PENDING.
  void ForgetTakeoversOfStartedGangs(const GangTable& gangs);

  std::vector<Reservation> reservations_;
  std::vector<int> reserved_slot_;  // fleet slot -> index in reservations_
  // The capacity epoch the reservations were planned at: they are
  // re-planned when it moves, and kept while nothing changes.
  int64_t planned_epoch_ = -1;
  // When the reservations were last planned from scratch.
  absl::Time replanned_at_ = absl::InfinitePast();
  // Whether kept reservations were re-estimated since that plan (a full
  // plan then follows once the interval has passed, changes or not).
  bool refreshed_ = false;
  // The noted causes of the gangs holding reservations (or whose
  // reservation went this cycle).
  std::map<GangId, Cause> causes_;
  // Per PENDING gang, how many times its reservation went (kept in memory
  // only: a restart starts every count over).
  std::map<GangId, int> takeovers_;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_RESERVATION_BOOK_H_
