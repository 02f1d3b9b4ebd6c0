// FitCache: answers about where gangs could fit that are costly to compute
// and stay true while the fleet does — whether a placement shape can ever
// fit the fleet as built, when a shape would start once running gangs end,
// and which slots some gang may not use (reserved or held).
//
// The only writer of its caches; each answer is keyed or versioned by what
// it depends on, so a stale one is never returned. Owned by the Scheduler;
// not thread-safe.
#ifndef PHALANX_CORE_FIT_CACHE_H_
#define PHALANX_CORE_FIT_CACHE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "core/fleet.h"
#include "core/model.h"

namespace phalanx::core {

class GangTable;
class Plan;
class PreemptionBook;
class ReservationBook;

class FitCache {
 public:
  // Whether a gang fits `fleet` now (reservations and holds aside), else
  // when it could start once running gangs end (nullopt: never).
  struct NaturalStart {
    bool fits_now = false;
    std::optional<absl::Time> start;
  };

  // Why `spec` could never fit `fleet` with every node READY and idle
  // ("can never fit: …"), or "" if it could; kept per placement shape for
  // one fleet structure version. `fleet` is only read.
  const std::string& NeverFitsReason(const GangSpec& spec, Fleet& fleet);
  // When `gang` would start without preempting; kept per placement shape
  // for one fleet version, time and earliest expected end. `fleet` is
  // restored as it was.
  NaturalStart WhenItFits(const Gang& gang, Fleet& fleet,
                          const GangTable& gangs, absl::Time now);
  // Slots that some gang may not use (reserved, held for a preemptor, or
  // planned for a gang by a binding plan), sorted: the only ones a
  // placement's node filter needs to ask about.
  const std::vector<int>& RestrictedSlots(const ReservationBook& reservations,
                                          const PreemptionBook& holds,
                                          const Plan& plan, const Fleet& fleet);
  // Forgets the restricted slots (reservations or holds changed).
  void ForgetRestricted() { restricted_slots_.reset(); }

 private:
  // `fleet` with every node READY and idle, rebuilt when its structure
  // changes (for the joint "can it ever fit" search).
  Fleet& IdleTwin(const Fleet& fleet);

  // "Can it ever fit" by placement shape, for one structure version.
  absl::flat_hash_map<std::string, std::string> ever_fits_;
  uint64_t ever_fits_version_ = 0;
  // The fleet with every node READY and idle, for the joint search.
  std::unique_ptr<Fleet> idle_twin_;
  uint64_t idle_twin_version_ = 0;
  // WhenItFits by placement shape, for one fleet version, time and
  // earliest expected end (any change of them starts it afresh).
  struct BudgetMemo {
    uint64_t fleet_version = 0;
    absl::Time now = absl::InfinitePast();
    absl::Time earliest_end = absl::InfinitePast();
    absl::flat_hash_map<std::string, NaturalStart> starts;
  };
  BudgetMemo budget_memo_;
  std::optional<std::vector<int>> restricted_slots_;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_FIT_CACHE_H_
