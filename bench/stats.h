// Percentiles for the simulator's metrics and the performance tools'
// latencies: one definition (linear interpolation between closest ranks).
// Pure functions; thread-safe.
#ifndef PHALANX_BENCH_STATS_H_
#define PHALANX_BENCH_STATS_H_

#include <vector>

namespace phalanx::bench {

// Returns the `p`-th percentile (0..100, clamped) of `sorted` (ascending) by
// linear interpolation between closest ranks; 0 for no samples.
double PercentileOfSorted(const std::vector<double>& sorted, double p);

// Sorts `samples` and returns PercentileOfSorted(samples, p).
double Percentile(std::vector<double>& samples, double p);

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_STATS_H_
