// Repair in place (docs/design.md §6 "Node failure"): new places for only those
// pods of a gang that sit on nodes it must leave (failed, or drained past their
// deadline) or on GPUs reported unhealthy, such that every pod set's topology
// constraint still holds:
//   REQUIRED level L     — inside the domain at L that holds the pod set's
//                          other pods (anywhere at L when none is left);
//   PREFERRED level L    — the narrowest domain that holds all the set's
//                          other pods first, then wider ones, then as a new
//                          PREFERRED placement anywhere;
//   UNCONSTRAINED        — anywhere, least-free nodes first.
// A gang that does not mix GPU models keeps its model. Placement itself is
// PlaceGang's, so the tightest fit wins and whole nodes stay whole.
// Pure functions over a Fleet; the Fleet is left as it was. Not thread-safe
// with writers of that Fleet.
#ifndef PHALANX_CORE_REPAIR_H_
#define PHALANX_CORE_REPAIR_H_

#include <string>
#include <vector>

#include "core/fleet.h"
#include "core/model.h"
#include "core/placement.h"

namespace phalanx::core {

struct RepairOptions {
  // vacate[slot]: the gang's pods on that node must move (by fleet slot).
  std::vector<char> vacate;
  // allowed[slot]: moved pods may go there (reservations, holds for
  // preemptors); empty = every node. Only READY nodes are ever used.
  std::vector<char> allowed;
  // As PlacementOptions::model_gate (quota); null = every model allowed.
  ModelGate model_gate;
  // Lowest nodes and domains in fleet order instead of best fit.
  bool first_fit = false;
};

struct RepairResult {
  bool repaired = false;
  // The gang's whole placement after the repair, in its original order:
  // pods that stay are unchanged, moved pods keep their pod set and index.
  std::vector<PodPlacement> placement;
  int moved_pods = 0;
  std::string reason;  // why not, when not repaired
};

// Whether `pod` (of a gang holding capacity on `fleet`) must move: its node
// is set in `vacate` (by fleet slot), or it holds a GPU the node's agent
// reported unhealthy.
bool PodMustMove(const Fleet& fleet, const std::vector<char>& vacate,
                 const PodPlacement& pod);

// Plans the repair of `gang` (which holds capacity on `fleet`). Fails, with
// a reason naming the pod set, when some moved pod set cannot be placed
// under its constraint (or uses slices or groups, which repair does not
// handle), or when the moved pods together fail the model gate; nothing is
// then moved. Deterministic.
RepairResult PlanRepair(const Gang& gang, Fleet& fleet,
                        const RepairOptions& options);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_REPAIR_H_
