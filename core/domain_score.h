// Domain-level end-time packing (PlacementConfig::domain_end_time_packing):
// among the domains (racks, blocks) where a topology-constrained gang fits
// now, the one whose running gangs it keeps busy the least beyond when they
// end anyway. A domain comes free whole only when its last gang ends; a gang
// placed where the others end later than it does delays nothing, and a
// domain where nothing runs is used last (it is the one a large gang needs
// whole). Best fit's order breaks ties. Pure functions; thread-safe.
#ifndef PHALANX_CORE_DOMAIN_SCORE_H_
#define PHALANX_CORE_DOMAIN_SCORE_H_

#include <tuple>

#include "absl/time/time.h"

namespace phalanx::core {

// How a candidate domain ranks for a gang (lower first).
struct DomainRank {
  // How much later than now the domain's last expected end the gang would
  // end (0 when it ends no later); infinite for a gang without estimate.
  double extension_seconds = 0;
  // |the domain's last expected end − the gang's end|: among domains it
  // does not extend, the closest end (infinite when unknown).
  double gap_seconds = 0;
  // The domain's place in best fit's own order (0 = best fit's choice).
  int best_fit_order = 0;
  bool operator<(const DomainRank& o) const {
    return std::tie(extension_seconds, gap_seconds, best_fit_order) <
           std::tie(o.extension_seconds, o.gap_seconds, o.best_fit_order);
  }
};

// Ranks a domain whose gangs' latest expected end is `latest_end`
// (InfinitePast or <= now when nothing runs there, InfiniteFuture when a
// gang there has no estimate) for a gang expected to end at `gang_end`
// (InfiniteFuture without an estimate: every domain then ties, and best
// fit decides).
DomainRank RankDomain(absl::Time latest_end, absl::Time gang_end,
                      absl::Time now, int best_fit_order);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_DOMAIN_SCORE_H_
