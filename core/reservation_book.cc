#include "core/reservation_book.h"

#include <utility>

#include "core/gang_table.h"

namespace phalanx::core {
namespace {

// A full plan weighs every domain of a level (a pass over the fleet), so
// like Slurm's backfill interval it runs at most this often while capacity
// keeps changing; in between, each kept reservation is re-estimated on its
// own domain.
constexpr absl::Duration kFullReplanInterval = absl::Seconds(10);

}  // namespace

const Reservation* ReservationBook::Of(const GangId& gang) const {
  for (const Reservation& reservation : reservations_) {
    if (reservation.gang == gang) return &reservation;
  }
  return nullptr;
}

void ReservationBook::NoteCause(const GangId& gang, Cause cause) {
  causes_[gang] = std::move(cause);
}

ReservationBook::Cause ReservationBook::TakeCause(const GangId& gang) {
  auto it = causes_.find(gang);
  if (it == causes_.end()) return {};
  Cause cause = std::move(it->second);
  causes_.erase(it);
  return cause;
}

std::vector<char> ReservationBook::TakenSlots() const {
  std::vector<char> taken(reserved_slot_.size());
  for (size_t i = 0; i < taken.size(); ++i) taken[i] = reserved_slot_[i] >= 0;
  return taken;
}

bool ReservationBook::MayReserve(const ReservationConfig& config, int priority,
                                 absl::Time submit_time, absl::Time now) const {
  return size() < config.depth &&
         MayHoldReservation(config, priority, submit_time, now);
}

bool ReservationBook::MayHoldReservation(const ReservationConfig& config,
                                         int priority, absl::Time submit_time,
                                         absl::Time now) {
  return priority >= config.min_priority ||
         (config.after > absl::ZeroDuration() &&
          now - submit_time >= config.after);
}

void ReservationBook::Add(Reservation reservation, const Fleet& fleet) {
  const int index = size();
  for (int slot : SlotsOf(reservation, fleet)) {
    if (reserved_slot_[slot] < 0) reserved_slot_[slot] = index;
  }
  reservations_.push_back(std::move(reservation));
}

bool ReservationBook::KeepOrReplan(const ReservationConfig& config,
                                   int64_t epoch, Fleet& fleet,
                                   const GangTable& gangs, absl::Time now) {
  const bool moved = planned_epoch_ != epoch;
  const bool resized = reserved_slot_.size() != fleet.slots().size();
  const bool due = now - replanned_at_ >= kFullReplanInterval;
  if (!resized && !(moved || (refreshed_ && due))) return false;
  const bool from_scratch = resized || due;
  std::vector<Reservation> previous = std::move(reservations_);
  reservations_.clear();
  if (from_scratch) {
    replanned_at_ = now;
    refreshed_ = false;
    ForgetTakeoversOfStartedGangs(gangs);
  } else {
    refreshed_ = true;  // a full plan is owed once due
  }
  std::vector<char> taken(fleet.slots().size(), 0);
  for (const Reservation& reservation : previous) {
    if (static_cast<int>(reservations_.size()) >= config.depth) break;
    const GangPtr gang = gangs.Find(reservation.gang);
    if (gang == nullptr || gang->state != GangState::kPending) continue;
    if (from_scratch && !Protected(config, *gang, now)) continue;
    std::optional<Reservation> again = RefreshReservation(
        reservation, *gang, fleet, taken,
        [&gangs](GangHandle h) { return gangs.Peek(h); }, now);
    if (!again || !WithinWindow(config, *again, now)) continue;
    for (int slot : SlotsOf(*again, fleet)) taken[slot] = 1;
    reservations_.push_back(*std::move(again));
  }
  IndexSlots(fleet);
  return true;
}

int ReservationBook::TakeoversOf(const GangId& gang) const {
  auto it = takeovers_.find(gang);
  return it == takeovers_.end() ? 0 : it->second;
}

bool ReservationBook::Protected(const ReservationConfig& config,
                                const Gang& gang, absl::Time now) const {
  // Only a gang still waiting on its reservation, and still entitled to
  // one: a held queue, a quota refusal or a preemption of its own ends it.
  return config.max_takeovers >= 0 &&
         gang.reason_code == ReasonCode::kReserved &&
         MayHoldReservation(config, gang.spec.priority, gang.submit_time,
                            now) &&
         TakeoversOf(gang.id) >= config.max_takeovers;
}

void ReservationBook::ForgetTakeoversOfStartedGangs(const GangTable& gangs) {
  for (auto it = takeovers_.begin(); it != takeovers_.end();) {
    const GangPtr gang = gangs.Find(it->first);
    if (gang == nullptr || gang->state != GangState::kPending) {
      it = takeovers_.erase(it);
    } else {
      ++it;
    }
  }
}

void ReservationBook::IndexSlots(const Fleet& fleet) {
  reserved_slot_.assign(fleet.slots().size(), -1);
  for (size_t r = 0; r < reservations_.size(); ++r) {
    for (int slot : SlotsOf(reservations_[r], fleet)) {
      if (reserved_slot_[slot] < 0) reserved_slot_[slot] = static_cast<int>(r);
    }
  }
}

std::vector<int> ReservationBook::SlotsOf(const Reservation& reservation,
                                          const Fleet& fleet) {
  std::vector<int> slots;
  for (const NodeId& node : reservation.nodes) {
    if (const int slot = fleet.Find(node); slot >= 0) slots.push_back(slot);
  }
  return slots;
}

bool ReservationBook::WithinWindow(const ReservationConfig& config,
                                   const Reservation& reservation,
                                   absl::Time now) {
  return config.window <= absl::ZeroDuration() ||
         reservation.start <= now + config.window;
}

bool ReservationBook::MayBackfill(const Gang& gang,
                                  const Reservation& reservation,
                                  absl::Time now) {
  if (gang.id == reservation.gang) return true;
  const absl::Duration estimate = gang.spec.estimated_runtime;
  return estimate > absl::ZeroDuration() && now + estimate <= reservation.start;
}

}  // namespace phalanx::core
