#include "bench/sim/elastic_jobs.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "bench/sim/sim_metrics.h"
#include "bench/sim/sim_random.h"

namespace phalanx::bench {

int ElasticMinimum(int count, int slice_size) {
  const int half = (count + 1) / 2;
  if (slice_size <= 0) return half;
  const int slices = (half + slice_size - 1) / slice_size;
  return std::min(count, slices * slice_size);
}

void MakeElastic(std::vector<TraceJob>& jobs, double fraction, uint64_t seed) {
  // A stream of its own, so the marks change no other draw.
  SimRandom random(seed ^ 0x5deece66dULL);
  std::vector<std::pair<double, size_t>> large;  // (draw, job index)
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].elastic = false;
    if (jobs[i].gpus >= kLargeGangGpus) large.emplace_back(random.Uniform(), i);
  }
  const double share = std::clamp(fraction, 0.0, 1.0);
  const size_t marked = static_cast<size_t>(
      std::llround(share * static_cast<double>(large.size())));
  std::sort(large.begin(), large.end());
  for (size_t k = 0; k < marked; ++k) jobs[large[k].second].elastic = true;
}

void SetElasticMinimum(core::GangSpec& spec) {
  core::PodSetSpec* largest = nullptr;
  for (core::PodSetSpec& set : spec.pod_sets) {
    if (largest == nullptr || set.count > largest->count) largest = &set;
  }
  if (largest == nullptr) return;
  const int minimum = ElasticMinimum(largest->count, largest->slice.size);
  if (minimum < largest->count) largest->min_count = minimum;
}

}  // namespace phalanx::bench
