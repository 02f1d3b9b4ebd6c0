// Placement (docs/design.md §6): where a gang's pods go on a Fleet, all or
// nothing. REQUIRED picks the best-fitting domain at the level and descends
// into it; PREFERRED walks up a level at a time (then onto the fewest
// nodes); UNCONSTRAINED packs the least-free nodes first. The pod sets of a
// gang are placed jointly: a bounded search over their order (most
// constrained first; every order for up to 4 sets; at most 24 orders), so
// the order they are listed in never decides. Pure functions over a Fleet;
// not thread-safe with writers of that Fleet.
#ifndef PHALANX_CORE_PLACEMENT_H_
#define PHALANX_CORE_PLACEMENT_H_

#include <functional>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "core/model.h"
#include "core/node_score.h"
#include "core/placement_filters.h"

namespace phalanx::core {

struct PlacementResult {
  bool placed = false;
  std::vector<PodPlacement> pods;  // in pod-set order when placed
  std::string reason;              // why not, when not placed
  // Why not, as a code: kQuota when the model gate refused it, else kNoFit
  // (kNeverFits on the total-capacity basis).
  ReasonCode code = ReasonCode::kNone;
};

// Says whether a gang may use `gpus` GPUs of `model` (for example, whether
// its queue's quota allows it): "" if so, else the reason.
using ModelGate =
    std::function<std::string(const std::string& model, int64_t gpus)>;

struct PlacementOptions {
  CapacityBasis basis = CapacityBasis::kFree;
  // Lowest nodes and domains in fleet order instead of best fit.
  bool first_fit = false;
  // Checked before a GPU model is tried (after placing, for gangs that mix
  // models); null = every model allowed.
  ModelGate model_gate;
  // Whether the node at a fleet slot may be used (reservations); null = all.
  std::function<bool(int slot)> node_allowed;
  // When set, node_allowed is asked only about these slots (sorted); every
  // other slot is allowed. Lets placement count free capacity per domain
  // from the fleet's free index instead of visiting every node.
  const std::vector<int>* restricted_slots = nullptr;
  // The Fleet domain (index into Fleet::domains()) whose nodes placement
  // may use; 0 = the whole fleet. Inside it, a constraint at its level or
  // above is met by the domain itself.
  int within_domain = 0;
  // When set, UNCONSTRAINED pod sets take nodes in this order (lowest
  // first; ties in fleet order) instead of fewest free GPUs first:
  // `gpus` is what the set would put on `slot` (core/node_score.h).
  std::function<NodeRank(int slot, int gpus)> node_rank;
};

// Whether a gang of `spec` may run on GPUs of `model`: it allows mixed
// models, or every pod set accepts that model (or any).
bool AcceptsModel(const GangSpec& spec, const std::string& model);

// Finds a placement for every pod of `spec` on `fleet`. Leaves `fleet` as it
// was (pod sets are placed tentatively one after another, then released).
// Deterministic: ties are broken by fleet order.
PlacementResult PlaceGang(const GangSpec& spec, Fleet& fleet,
                          const PlacementOptions& options);
inline PlacementResult PlaceGang(const GangSpec& spec, Fleet& fleet,
                                 CapacityBasis basis = CapacityBasis::kFree) {
  PlacementOptions options;
  options.basis = basis;
  return PlaceGang(spec, fleet, options);
}

// A string equal for two specs exactly when placement treats them alike
// (pod set counts, resources, topology, models; not names, queue or
// priority).
std::string PlacementShapeKey(const GangSpec& spec);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_PLACEMENT_H_
