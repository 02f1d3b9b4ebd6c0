// NodeVacator: moves gangs off nodes that failed, or that passed their
// drain deadline (docs/design.md §3, §6) — repaired in place when their
// topology constraints allow (only their pods on those nodes move, event
// REPAIRED), else evicted and requeued in their old place in line (EVICTED).
//
// Lives for one call on a Scheduler's owners; not thread-safe.
#ifndef PHALANX_CORE_NODE_VACATOR_H_
#define PHALANX_CORE_NODE_VACATOR_H_

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/placement.h"
#include "core/scheduler_state.h"

namespace phalanx::core {

class NodeVacator {
 public:
  enum class Cause { kUnhealthy, kDrainDeadline, kUnhealthyGpu };

  NodeVacator(SchedulerState& s, absl::Time now) : s_(s), now_(now) {}

  // Moves every gang off the nodes at `slots` (and any UNHEALTHY node),
  // highest priority first. PREEMPTING victims are always requeued: they
  // stop within their grace period anyway. Counts each outcome in the
  // scheduler's vacate counts.
  void Vacate(const std::vector<int>& slots, Cause cause);
  // Moves the pods on GPUs reported unhealthy at `slot` (and any pod on an
  // UNHEALTHY node), repaired or evicted as Vacate does; pods on the
  // node's healthy GPUs stay, and the node keeps taking pods.
  void VacateUnhealthyGpus(int slot);

 private:
  // Repairs or evicts each of `gangs` (by id, with the node that made it
  // move), `vacate` naming the slots all pods must leave.
  void MoveGangs(const std::vector<std::pair<GangId, NodeId>>& gangs,
                 const std::vector<char>& vacate, Cause cause);
  // Moves the pods of `gang` on slots where `vacate` is set (event
  // REPAIRED). FailedPrecondition saying why, and no change, when its
  // constraints cannot be kept.
  absl::Status TryRepair(const GangPtr& gang, const std::vector<char>& vacate);
  // Slots a repair of `gang` may use: not held for another preemptor, not
  // reserved for a gang it is not expected to end before.
  std::vector<char> RepairTargets(const Gang& gang) const;
  // Quota for a repair: moving GPUs within a model costs nothing; only
  // growth of a model beyond what `moved` frees needs quota.
  ModelGate RepairQuotaGate(const Gang& gang,
                            const std::vector<PodPlacement>& moved) const;

  SchedulerState& s_;
  const absl::Time now_;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_NODE_VACATOR_H_
