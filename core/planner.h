// Planner: keeps a Scheduler's plan (core/plan.h) current at the end of an
// admission cycle. Every PlanningConfig::interval — and when the fleet's
// structure or the planning config changed — it makes the plan again from
// scratch: the running gangs' expected ends, then the pending gangs in
// admission order (core/cycle_order.h) up to max_gangs. Between, gangs that
// arrived (submitted, requeued) are planned behind the planned ones, and
// gangs that left PENDING have already dropped out (SchedulerState::Put).
//
// Lives for one cycle; not thread-safe.
#ifndef PHALANX_CORE_PLANNER_H_
#define PHALANX_CORE_PLANNER_H_

#include "absl/time/time.h"
#include "core/plan.h"
#include "core/scheduler_state.h"

namespace phalanx::core {

class Planner {
 public:
  Planner(SchedulerState& s, absl::Time now) : s_(s), now_(now) {}
  // Re-plans when due, else plans the arrivals; tells the cycle's caches
  // when holds changed.
  void Run();

 private:
  bool Due() const;
  void Replan();
  void PlanArrivals();
  // Plans one pending gang behind the planned ones.
  void PlanGang(const Gang& gang);
  std::vector<Plan::Running> RunningGangs() const;

  SchedulerState& s_;
  const absl::Time now_;
};

// How long `gang` is expected to run: its estimate, else its max_runtime,
// else `fallback`.
absl::Duration PlannedRuntime(const Gang& gang, absl::Duration fallback);

// Until when a gang starting now may hold capacity planned for others:
// now + its estimate, else + its max_runtime, else InfiniteFuture (it may
// run for ever, so it may not backfill into a planned start).
absl::Time BackfillEnd(const Gang& gang, absl::Time now);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_PLANNER_H_
