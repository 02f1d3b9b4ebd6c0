// A seeded generator of an LLM lab's workload, for replays of a fleet of
// H100/H200 nodes (Philly's jobs are small next to such a lab's).
//
// Five teams (pretrain, posttrain, multimodal, eval, research) submit four
// kinds of job:
//   debug     1..8 GPUs,      median 15 min  (55 % of jobs)
//   eval      8..64 GPUs,     median 1 h     (30 %), 10 % priority 1
//   finetune  16..256 GPUs,   median 6 h     (13 %), 10 % priority 1
//   pretrain  256..1024 GPUs, median 1 day   (2 %),  25 % priority 2
// The half-fleet profile keeps debug, eval and finetune and makes pretrain
// the gangs a fleet fears most: a quarter or half of the fleet's GPUs (70 %
// half), 3 % of jobs.
// Durations are log-normal, capped per kind; debug and eval arrivals follow a
// working-day cycle. The arrival rate is set so that the mean demand is
// `load` × `fleet_gpus`. With `elastic_fraction`, that share of the gangs of
// 64 GPUs or more may run on half their pods (TraceJob::elastic); no other
// draw changes. The same options give the same jobs, byte for byte
// (a Mersenne Twister and the standard library's math, no std::
// distributions, whose output differs between library versions).
// Pure function; thread-safe.
#ifndef PHALANX_BENCH_SIM_SYNTHETIC_H_
#define PHALANX_BENCH_SIM_SYNTHETIC_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "bench/sim/trace.h"

namespace phalanx::bench {

enum class SyntheticProfile {
  kLab,        // the mix above
  kHalfFleet,  // pretrain gangs of 1/4 and 1/2 of the fleet
};

struct SyntheticOptions {
  uint64_t seed = 1;
  double days = 14;  // arrivals span [start, start + days)
  int64_t fleet_gpus = 2048;
  double load = 0.95;        // mean demanded GPUs ÷ fleet_gpus
  int max_gang_gpus = 1024;  // larger draws are clamped to this
  SyntheticProfile profile = SyntheticProfile::kLab;
  // The share of the gangs of at least 64 GPUs that are elastic down to
  // half their pods, with the same work (MakeElastic, bench/sim/
  // elastic_jobs.h, from `seed`); 0 = none.
  double elastic_fraction = 0;
  absl::Time start = absl::FromCivil(absl::CivilSecond(2025, 1, 6, 0, 0, 0),
                                     absl::UTCTimeZone());
};

// Returns the jobs in submit order (line = 0).
std::vector<TraceJob> GenerateSynthetic(const SyntheticOptions& options);

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_SIM_SYNTHETIC_H_
