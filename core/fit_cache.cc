#include "core/fit_cache.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/gang_table.h"
#include "core/placement.h"
#include "core/plan.h"
#include "core/preemption_book.h"
#include "core/reservation.h"
#include "core/reservation_book.h"

namespace phalanx::core {

// Placing against every GPU of the fleet costs a pass over all nodes, so the
// answer is kept per placement shape until the fleet's structure changes.
const std::string& FitCache::NeverFitsReason(const GangSpec& spec,
                                             Fleet& fleet) {
  constexpr size_t kMaxShapes = 4096;
  if (ever_fits_version_ != fleet.structure_version() ||
      ever_fits_.size() >= kMaxShapes) {
    ever_fits_.clear();
    ever_fits_version_ = fleet.structure_version();
  }
  auto [it, added] = ever_fits_.try_emplace(PlacementShapeKey(spec));
  if (!added) return it->second;
  // Each pod set on every GPU first (cheap, and it names the set that can
  // never fit); then, for several pod sets, the joint search on an idle
  // twin of the fleet, where the sets take room from one another.
  it->second = PlaceGang(spec, fleet, CapacityBasis::kTotal).reason;
  if (it->second.empty() && spec.pod_sets.size() > 1) {
    PlacementResult joint = PlaceGang(spec, IdleTwin(fleet));
    if (!joint.placed) {
      std::string why =
          absl::StrReplaceAll(joint.reason, {{"NO_FIT: ", ""},
                                             {"NO_FIT at level ", "at level "},
                                             {"largest free ", "largest "}});
      it->second = absl::StrCat("can never fit: ", why);
    }
  }
  return it->second;
}

Fleet& FitCache::IdleTwin(const Fleet& fleet) {
  if (idle_twin_ != nullptr &&
      idle_twin_version_ == fleet.structure_version()) {
    return *idle_twin_;
  }
  idle_twin_ = std::make_unique<Fleet>(fleet.levels());
  std::vector<Node> nodes;
  nodes.reserve(fleet.slots().size());
  for (const Fleet::Slot& slot : fleet.slots()) {
    nodes.push_back(slot.node);
    nodes.back().state = NodeState::kReady;
  }
  idle_twin_->Upsert(nodes);
  idle_twin_version_ = fleet.structure_version();
  return *idle_twin_;
}

FitCache::NaturalStart FitCache::WhenItFits(const Gang& gang, Fleet& fleet,
                                            const GangTable& gangs,
                                            absl::Time now) {
  // No running gang is expected to end before the earliest of their ends:
  // the bound a reservation plan is given too (it skips domains that
  // cannot win, never changing which one does).
  const absl::Time earliest_end = gangs.EarliestEnd();
  // The answer is a function of the placement shape, the fleet (its
  // version), `now` and that bound alone: preemptors of one shape in a
  // cycle ask once.
  BudgetMemo& memo = budget_memo_;
  if (memo.fleet_version != fleet.version() || memo.now != now ||
      memo.earliest_end != earliest_end) {
    memo = BudgetMemo{fleet.version(), now, earliest_end, {}};
  }
  auto [it, fresh] = memo.starts.try_emplace(PlacementShapeKey(gang.spec));
  NaturalStart& answer = it->second;
  if (!fresh) return answer;
  // Kept out only by reservations or holds: it is about to fit.
  if (PlaceGang(gang.spec, fleet).placed) {
    answer.fits_now = true;
    return answer;
  }
  const std::vector<char> none(fleet.slots().size());
  // PlanReservation releases gangs tentatively and restores them.
  // Gangs on loan leave only when a reservation takes its nodes back: on
  // its own the gang waits for their expected ends.
  const std::optional<Reservation> natural = PlanReservation(
      gang, fleet, none, [&gangs](GangHandle h) { return gangs.Peek(h); }, now,
      earliest_end, /*by_stranding=*/false, /*loans_leave_now=*/false);
  if (natural) answer.start = natural->start;
  return answer;
}

const std::vector<int>& FitCache::RestrictedSlots(
    const ReservationBook& reservations, const PreemptionBook& holds,
    const Plan& plan, const Fleet& fleet) {
  if (restricted_slots_) return *restricted_slots_;
  std::vector<int> slots;
  for (const Reservation& reservation : reservations.all()) {
    for (int slot : ReservationBook::SlotsOf(reservation, fleet)) {
      slots.push_back(slot);
    }
  }
  for (int slot : holds.HeldSlots(fleet)) slots.push_back(slot);
  if (plan.config().binding) {
    const std::vector<int>& planned = plan.BindingSlots();
    slots.insert(slots.end(), planned.begin(), planned.end());
  }
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  return restricted_slots_.emplace(std::move(slots));
}

}  // namespace phalanx::core
