// LeaseTable: when each leased gang's lease lapses (GangSpec.lease_duration),
// so that a crashed launcher cannot hold GPUs. The Scheduler keeps one entry
// per leased gang that holds GPUs, mirroring Gang::lease_expire_time, and
// asks the table at every cycle which leases have lapsed. A lease never
// lapses before the table's `not_before` time (the daemon's start-up grace
// after a restart: launchers could not renew while it was down).
//
// Pure logic, no clock: time is an argument. Thread-compatible.
#ifndef PHALANX_CORE_LEASE_TABLE_H_
#define PHALANX_CORE_LEASE_TABLE_H_

#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "core/ids.h"

namespace phalanx::core {

class LeaseTable {
 public:
  // Sets (or moves) the expiry of `gang`'s lease.
  void Set(const GangId& gang, absl::Time expire);
  // Forgets `gang`'s lease; a no-op without one.
  void Erase(const GangId& gang);
  // Returns when `gang`'s lease lapses, or nullopt without one.
  std::optional<absl::Time> ExpiryOf(const GangId& gang) const;
  // No lease lapses before `time` (leases due earlier lapse then).
  void set_not_before(absl::Time time) { not_before_ = time; }
  // Removes and returns the gangs whose lease has lapsed at `now` (expiry
  // <= now and not_before <= now), earliest expiry first, ties by id.
  std::vector<GangId> TakeLapsed(absl::Time now);
  // The earliest time a lease can lapse, or InfiniteFuture without leases.
  absl::Time NextLapse() const;
  size_t size() const { return expiry_.size(); }

 private:
  std::map<GangId, absl::Time> expiry_;
  std::set<std::pair<absl::Time, GangId>> by_time_;
  absl::Time not_before_ = absl::InfinitePast();
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_LEASE_TABLE_H_
