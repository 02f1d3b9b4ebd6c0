// Housekeeping: the first phase of every admission cycle — what time alone
// makes happen (docs/design.md §3, §6). It expires idempotency keys, applies
// retention to final gangs and events, samples the fair-share ledger, fails
// gangs past max_runtime or whose lease lapsed, requeues gangs past
// start_timeout and victims past their grace period, marks nodes without a
// recent heartbeat UNHEALTHY, and vacates drained nodes past their deadline.
//
// Lives for one call on a Scheduler's owners; not thread-safe.
#ifndef PHALANX_CORE_HOUSEKEEPING_H_
#define PHALANX_CORE_HOUSEKEEPING_H_

#include "absl/time/time.h"
#include "core/scheduler_state.h"

namespace phalanx::core {

class Housekeeping {
 public:
  Housekeeping(SchedulerState& s, absl::Time now) : s_(s), now_(now) {}
  // Runs every step below, in this order.
  void Run();

 private:
  // Expires idempotency keys (and the tombstones only they kept), applies
  // retention to final gangs, trims events beyond retention.
  void ExpireAndTrim();
  // Fires due max_runtime, start_timeout and grace-period timers.
  void ExpireTimers();
  // Fails the gangs whose lease has lapsed (reason LEASE_EXPIRED).
  void ExpireLeases();
  void CheckHeartbeats();
  // Moves gangs off DRAINING nodes whose deadline has come.
  void ExpireDrains();

  SchedulerState& s_;
  const absl::Time now_;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_HOUSEKEEPING_H_
