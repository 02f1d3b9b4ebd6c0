// Reservations with backfill (docs/design.md §4 step 5). When a gang at the
// head of the order does not fit, PlanReservation picks the domain where it can
// start soonest — with runtime estimates, the domain whose running gangs'
// expected ends free enough GPUs earliest; without, the one that needs the
// least capacity released. "Enough" is decided by the placer itself (PlaceGang,
// every pod set, slice and group) on the capacity projected once those gangs
// end, and the nodes held are the ones that placement uses. While the
// reservation stands, other gangs may use its nodes only if they are
// expected to end before it starts. Pure functions over a Fleet they change
// tentatively and restore; thread-compatible.
#ifndef PHALANX_CORE_RESERVATION_H_
#define PHALANX_CORE_RESERVATION_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/fleet.h"
#include "core/model.h"

namespace phalanx::core {

struct Reservation {
  GangId gang;
  int domain = 0;               // Fleet domain index (0 = the whole fleet)
  std::string path;             // "" for the whole fleet
  absl::Time start;             // estimated; InfiniteFuture when unknown
  int64_t gpus_to_release = 0;  // still held by others in the domain
  // The nodes held for the gang: the nodes of its placement in the domain
  // once the gangs expected to end by `start` have ended (others may use
  // the rest of the domain).
  std::vector<NodeId> nodes;
  bool operator==(const Reservation&) const = default;
};

// Looks up a gang holding nodes by its handle (Fleet::Slot::gang_pods):
// its record, or null for an unknown handle.
using HolderLookup = std::function<const Gang*(GangHandle)>;

// When a running gang is expected to end: admit time + estimate, never
// before `now`; InfiniteFuture without an estimate.
absl::Time ExpectedEnd(const Gang& gang, absl::Time now);

// Whether a gang holding a reservation on `borrower`'s nodes may take them
// back (core/preemptor.h TakeBackLoans): `borrower` runs on loan
// (Gang::on_loan) and has no higher priority than `taker`.
bool MayTakeBack(const Gang& taker, const Gang& borrower);

// When a reservation plan for `reserving` expects the nodes of `holder` to
// free up: now if it may take them back, else at `holder`'s expected end.
absl::Time ReleaseTime(const Gang& holder, const Gang& reserving,
                       absl::Time now);

// Plans a reservation for `gang` on `fleet`, avoiding nodes where
// `taken[slot]` is true (reserved for earlier gangs, held for preemptors).
// `find` looks up the gangs holding nodes (null for an unknown one; the
// gangs stay put until the call returns); no running gang is expected to
// end before `earliest_end` (a bound the plan uses to skip domains that
// cannot win; InfinitePast when unknown). Returns nullopt when no domain
// could host it even once every gang there ended, and when it fits now (a
// reservation is for a gang that waits for capacity, never a hold on nodes
// it could take already). Leaves `fleet` as it was. Of the domains that
// could host it, the earliest expected start wins; with `by_stranding`,
// the least idle capacity (ReservationConfig::choose_by_stranding).
// `loans_leave_now`: gangs on loan that `gang` may take back free their
// nodes now (ReleaseTime); else every gang frees them at its expected end
// (when the gang would fit on its own).
std::optional<Reservation> PlanReservation(
    const Gang& gang, Fleet& fleet, const std::vector<char>& taken,
    const HolderLookup& find, absl::Time now,
    absl::Time earliest_end = absl::InfinitePast(), bool by_stranding = false,
    bool loans_leave_now = true);

// Re-estimates `reservation` of `gang` on its own domain (start, GPUs still
// to release, nodes), avoiding `taken` slots. Returns nullopt when that
// domain could no longer host the gang, or could now (it is then admitted
// like any gang). Costs O(log gangs there) placements inside the domain,
// where PlanReservation weighs every domain of the level.
std::optional<Reservation> RefreshReservation(const Reservation& reservation,
                                              const Gang& gang, Fleet& fleet,
                                              const std::vector<char>& taken,
                                              const HolderLookup& find,
                                              absl::Time now);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_RESERVATION_H_
