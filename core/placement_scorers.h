// Placement's ranking stages: once the filters said how many units (pods,
// or whole slices) each part can take — a domain, a child domain, a node —
// these decide which parts get them. Pure functions over plain vectors, so
// each is tested on its own table (placement_scorers_test.cc);
// thread-compatible.
//
// Adding a scorer: a ranking stage is a function of the parts' units and
// their tie keys (lower wins among parts that hold as many units). Today's
// tie key is a part's free GPUs (whole GPUs stay whole: PodSetPlacer's
// FreeGpus and DomainFreeGpus in placement.cc fill `tie`); a new score (a
// fragmentation score, the time a node's gangs end) either changes the key
// the placer passes there or becomes a stage of its own in a file of its
// own, called where PodSetPlacer ranks parts (Fill, FillSlices,
// FillFewestNodes), with a table test beside it.
#ifndef PHALANX_CORE_PLACEMENT_SCORERS_H_
#define PHALANX_CORE_PLACEMENT_SCORERS_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace phalanx::core {

// Stage "best_fit" (which domain): of `domains`, the one whose `units(d)`
// leave the least behind once `need` are taken; the first that holds them
// with `first_fit`; -1 when none does. Ties go to the first in order.
// Raises `largest` to the most any one holds (for the pending reason).
template <typename Units>
int BestFitDomain(const std::vector<int>& domains, int64_t need,
                  const Units& units, bool first_fit, int64_t& largest) {
  int best = -1;
  int64_t best_units = 0;
  for (int domain : domains) {
    const int64_t held = units(domain);
    largest = std::max(largest, held);
    if (held < need || (best >= 0 && (first_fit || held >= best_units))) {
      continue;
    }
    best = domain;
    best_units = held;
  }
  return best;
}

// Stage "distribute" (how a domain's units are spread over its parts):
// `count` units over parts that hold `left[i]` each — the part the
// remainder fits most tightly, else the largest, until none is left (with
// `first_fit`: in order). Among parts holding as many units, the lowest
// `tie[i]` wins (then the first): with free GPUs as the key, the part that
// leaves the fewest GPUs unused. Returns (part, units) in fill order; the
// parts must hold at least `count` together.
std::vector<std::pair<int, int64_t>> Distribute(std::vector<int64_t> left,
                                                const std::vector<int64_t>& tie,
                                                int64_t count, bool first_fit);

// One node a fewest-nodes fill may use.
struct FewestNodesCandidate {
  int64_t pods;       // pods of the set it holds
  int64_t leaf_pods;  // pods its lowest domain holds
  int free;           // its free GPUs
  int slot;           // fleet order
  int leaf;           // its lowest domain
};

// Stage "fewest_nodes" (PREFERRED once it walked up): `count` pods on the
// fewest nodes — the nodes that hold the most pods first (of those, the
// ones in the lowest domain that holds the most, so they cluster; then
// fewest free GPUs; then fleet order), and as the last node the one that
// fits the remainder most tightly: in a lowest domain already used, else
// the tightest one, then fewest free GPUs. Returns (slot, pods) in fill
// order; the candidates must hold at least `count` together.
std::vector<std::pair<int, int64_t>> FewestNodes(
    std::vector<FewestNodesCandidate> nodes, int64_t count);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_PLACEMENT_SCORERS_H_
