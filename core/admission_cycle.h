// AdmissionCycle: one run of the admission cycle (docs/design.md §4) over a
// Scheduler's owners — housekeeping, preemptors onto their held nodes, then
// every pending gang in cycle order: gate, quota, placement all or nothing,
// preemption, reservation, and a reason for each gang left pending.
//
// Lives for one Scheduler::RunCycle call and holds no state of its own
// beyond it; not thread-safe.
#ifndef PHALANX_CORE_ADMISSION_CYCLE_H_
#define PHALANX_CORE_ADMISSION_CYCLE_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "core/cycle_order.h"
#include "core/node_score.h"
#include "core/scheduler_state.h"

namespace phalanx::core {

class AdmissionCycle {
 public:
  AdmissionCycle(SchedulerState& s, absl::Time now) : s_(s), now_(now) {}
  // Runs the cycle's phases, in the order their comments number them.
  void Run();

  // The result of trying to admit one gang.
  struct Attempt {
    ReasonCode code = ReasonCode::kNone;  // kNone when admitted
    std::string reason;                   // "" when admitted
    bool backfill_matters = false;        // it would fit on nodes reserved for
                                          // others it may not backfill into
  };
  // Tries to place `gang` all or nothing on the nodes it may use, and
  // admits it when it fits.
  Attempt TryAdmit(const GangPtr& gang);

 private:
  // Admits preemptors whose victims have stopped onto the capacity held for
  // them; drops the holds of those that still do not fit.
  void AdmitPreemptors();
  // The node order of the configured placement scorers for `gang`'s
  // unconstrained pods (core/node_score.h); empty when none is on.
  std::function<NodeRank(int, int)> NodeRanker(const Gang& gang) const;
  // With placement.domain_end_time_packing: moves the placement of a gang
  // REQUIRED at one level into the domain of that level it fits in that
  // ranks best by core/domain_score.h (best fit's own when that ties),
  // within the gang's `room` in a binding plan.
  void PackByDomainEnd(const Gang& gang, const PlacementOptions& options,
                       std::optional<PlanRoom>& room,
                       PlacementResult& placement);
  // The latest expected end of the gangs with pods in `domain`.
  absl::Time LatestEndIn(int domain) const;
  int64_t FreeReadyGpus() const;
  // Whether `gang`, or a gang after it in this cycle's order, may preempt.
  bool MayPreemptFrom(const Gang& gang) const;
  // Whether a pending gang known to fail must still be offered, to make a
  // reservation; null in strict FIFO (every failure blocks).
  CycleOrder::CouldReserve CouldReserveNow() const;
  bool MayReserve(const Gang& gang) const;
  // Whether `gang` may take nodes `reservation` holds past its start, on
  // loan (ReservationConfig::preemptible_backfill: preemption on, and the
  // holder of no lower priority).
  bool MayBorrow(const Gang& gang, const Reservation& reservation) const;
  // Whether `gang` may use nodes `reservation` holds: backfill that ends
  // before it starts, or a loan.
  bool MayUse(const Gang& gang, const Reservation& reservation) const;
  // Whether `pods` take nodes reserved for another gang that `gang` could
  // not backfill into: it then runs on loan (Gang::on_loan).
  bool OnLoan(const Gang& gang, const std::vector<PodPlacement>& pods) const;
  // Whether `gang`, refused by quota, waits only for its cohort to lend
  // (and reservation.for_quota_waits lets it reserve).
  bool QuotaWaitsForLending(const Gang& gang) const;
  // Why a gang that failed with reservations in force waits, if the
  // reservations are the cause.
  std::optional<std::string> BlockedByReservation(const GangPtr& gang,
                                                  const Queue& queue);
  // Places `gang` (its planned nodes first) taking on no node more than its
  // `room` in a binding plan leaves it (none: no plan binds).
  PlacementResult PlaceWithinPlan(const Gang& gang,
                                  const PlacementOptions& options,
                                  std::optional<PlanRoom>& room);
  // Places `gang` within `room`: no node is used beyond it.
  PlacementResult PlaceInRoom(const Gang& gang, const PlacementOptions& options,
                              PlanRoom& room);
  // A gang whose planned start has come goes onto the nodes the plan gave
  // it when it fits there (so the plan's other starts hold); an empty
  // result otherwise.
  PlacementResult PlaceOnPlannedNodes(const Gang& gang,
                                      const PlacementOptions& options);
  // A gang whose planned start has come and that did not fit holds its
  // planned capacity no longer (Plan::Release).
  void ReleaseOverduePlan(const Gang& gang);
  // Why a gang that failed with a binding plan waits, if the plan's holds
  // are the cause (it fits once they are set aside).
  std::optional<std::string> BlockedByPlan(const GangPtr& gang,
                                           const Queue& queue);
  // The reservation `gang` holds, or a new one if it may reserve; returns
  // the reason prefix it then has. `cause` (why it did not fit) is kept for
  // when the reservation goes.
  std::optional<std::string> ReserveFor(const GangPtr& gang,
                                        const ReservationBook::Cause& cause);
  // Reserves a domain for `gang`; nothing beyond reservation.window.
  std::optional<std::string> Reserve(const GangPtr& gang);
  // Whether a gang of placement shape `shape` (holding no nodes of its
  // own) already failed to reserve in this cycle, with nothing else a
  // reservation plan reads changed since (unreservable_).
  bool KnownUnreservable(const std::string& shape);
  // Gives every pending gang of a group the cycle did not reach `reason`.
  void StampUnreached(ReasonCode code, const std::string& reason);
  // Gives gangs that joined a group known to fail the group's reason.
  void SettleJoinedGangs();
  // Pending gangs that held one of `previous` and hold none now drop the
  // "RESERVED: …" part of their reason: they wait for the cause they
  // reserved for.
  void ClearLostReservations(const std::vector<Reservation>& previous);
  // Emits RESERVED events for new reservations; bumps the epoch on change.
  void AnnounceReservations(const std::vector<Reservation>& previous);

  SchedulerState& s_;
  const absl::Time now_;
  // The placement shapes that failed to reserve in this cycle (no start,
  // or one beyond the window), while the fleet (its version), the
  // reservations and the preemptors' holds stayed as they were: what a
  // reservation plan reads besides the shape. A failed plan is not made
  // again for the next gang of the same shape.
  struct Unreservable {
    uint64_t fleet_version = 0;
    size_t reservations = 0;
    uint64_t hold_changes = 0;
    absl::flat_hash_set<std::string> shapes;
  };
  Unreservable unreservable_;
};

// "RESERVED: <n> nodes in <domain> are held for it until …".
std::string ReservedReason(const Reservation& reservation);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_ADMISSION_CYCLE_H_
