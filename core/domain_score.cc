#include "core/domain_score.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace phalanx::core {

DomainRank RankDomain(absl::Time latest_end, absl::Time gang_end,
                      absl::Time now, int best_fit_order) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  DomainRank rank;
  rank.best_fit_order = best_fit_order;
  if (gang_end == absl::InfiniteFuture()) {
    rank.extension_seconds = kInf;
    rank.gap_seconds = kInf;
    return rank;
  }
  // An idle domain frees now: the gang would keep it busy its whole run.
  const absl::Time free_at = std::max(latest_end, now);
  rank.extension_seconds =
      free_at == absl::InfiniteFuture()
          ? 0
          : std::max(0.0, absl::ToDoubleSeconds(gang_end - free_at));
  rank.gap_seconds = free_at == absl::InfiniteFuture()
                         ? kInf
                         : std::fabs(absl::ToDoubleSeconds(free_at - gang_end));
  return rank;
}

}  // namespace phalanx::core
