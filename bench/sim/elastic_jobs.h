// Elastic jobs in a replayed workload: which jobs may run on fewer pods
// than they ask for, and how few. A job MakeElastic marks (TraceJob::
// elastic) is submitted by the replay with its largest pod set's min_count
// at ElasticMinimum of its count (core/elastic.h); its `duration` stays its
// run time at full size, so its work (GPUs × duration) is unchanged.
// Pure functions; thread-safe.
#ifndef PHALANX_BENCH_SIM_ELASTIC_JOBS_H_
#define PHALANX_BENCH_SIM_ELASTIC_JOBS_H_

#include <cstdint>
#include <vector>

#include "bench/sim/trace.h"
#include "core/model.h"

namespace phalanx::bench {

// The fewest pods an elastic pod set of `count` pods in slices of
// `slice_size` pods (0 = no slices) runs with: half of `count` rounded up,
// then up to whole slices. Equal to `count` when it cannot shrink.
int ElasticMinimum(int count, int slice_size);

// Marks elastic round(`fraction` × n) of the n jobs of at least
// kLargeGangGpus GPUs (bench/sim/sim_metrics.h): those with the lowest of
// one uniform draw each, drawn in file order from a stream of `seed`'s own
// (the jobs are otherwise unchanged, and a larger fraction marks a superset
// of a smaller one's jobs). Clears the mark of every other job. `fraction`
// is clamped to [0, 1].
void MakeElastic(std::vector<TraceJob>& jobs, double fraction, uint64_t seed);

// Makes `spec`'s largest pod set (the first of the largest) elastic down to
// ElasticMinimum of its count; unchanged when that is its count.
void SetElasticMinimum(core::GangSpec& spec);

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_SIM_ELASTIC_JOBS_H_
