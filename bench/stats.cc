#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace phalanx::bench {

double PercentileOfSorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 *
                      static_cast<double>(sorted.size() - 1);
  const size_t low = static_cast<size_t>(std::floor(rank));
  const size_t high = std::min(low + 1, sorted.size() - 1);
  const double fraction = rank - static_cast<double>(low);
  return sorted[low] + (sorted[high] - sorted[low]) * fraction;
}

double Percentile(std::vector<double>& samples, double p) {
  std::sort(samples.begin(), samples.end());
  return PercentileOfSorted(samples, p);
}

}  // namespace phalanx::bench
