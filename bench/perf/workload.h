// Workloads shared by the core benchmarks and the load generator: a fleet of
// N nodes x 8 H100 GPUs in blocks and racks, eight team queues in one cohort,
// and a seeded mix of gang shapes and topology constraints. Deterministic:
// the same seed gives the same gangs on every machine. Plain values; no
// shared state.
#ifndef PHALANX_BENCH_PERF_WORKLOAD_H_
#define PHALANX_BENCH_PERF_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/model.h"
#include "core/scheduler.h"

namespace phalanx::perf {

inline constexpr int kGpusPerNode = 8;
inline constexpr int kNodesPerRack = 20;
inline constexpr int kRacksPerBlock = 10;
inline constexpr int kTeams = 8;
inline constexpr char kGpuModel[] = "H100";

// `count` nodes "n-00042" of 8 H100 GPUs, labelled block "b<i>" and rack
// "b<i>-r<j>": 20 nodes a rack, 10 racks a block (the last may be partial).
std::vector<core::Node> MakeFleet(int count);

// A cohort "org" and queues "team-0".."team-7" under it, each with an equal
// share of `total_gpus` as nominal quota, borrowing unlimited.
std::vector<core::Queue> MakeQueues(int64_t total_gpus);

// One gang shape of the mix.
struct Shape {
  std::string name;
  int pods = 1;
  int gpus = 1;
  core::TopologyMode mode = core::TopologyMode::kUnconstrained;
  std::string level;
  int weight = 1;  // relative frequency in the mix
};

// The mix: single GPUs to 32-node block-local gangs (mean ~10 GPUs a gang).
const std::vector<Shape>& ShapeMix();

// A gang of `shape` in `queue` at `priority`.
core::GangSpec SpecOf(const Shape& shape, const std::string& queue,
                      int priority);

// A seeded source of mixed gang specs: shape by weight, team uniformly,
// priority 1 for one gang in ten.
class GangMix {
 public:
  explicit GangMix(uint64_t seed) : state_(seed * 2 + 1) {}
  core::GangSpec Next();
  // A uniform integer in [0, n).
  uint64_t Below(uint64_t n);

 private:
  uint64_t state_;
};

// Config of the benchmarks: topology block/rack, everything else default.
core::Config BenchConfig();

// The epoch the benchmarks' virtual clocks start at.
absl::Time BenchStart();

// A scheduler with `nodes` nodes, the team queues and `pending` mixed gangs
// pending since BenchStart() (none admitted yet), restored as from a store.
std::unique_ptr<core::Scheduler> MakeScheduler(int nodes, int pending,
                                               uint64_t seed);
// The same with `config` instead of BenchConfig() (the scale benchmarks raise
// limits.max_pending_gangs_per_queue) and `reason` as the pending gangs'
// reason instead of core::kWaitingReason.
std::unique_ptr<core::Scheduler> MakeScheduler(int nodes, int pending,
                                               uint64_t seed,
                                               const core::Config& config,
                                               const std::string& reason);

// Submits `count` more gangs from `mix` at `now`; returns how many were
// accepted.
int SubmitMany(core::Scheduler& scheduler, GangMix& mix, int count,
               absl::Time now);

// Completes `count` random gangs of `active` (Report SUCCEEDED at `now`)
// and removes them from it; fewer when `active` runs out.
void CompleteRandom(core::Scheduler& scheduler,
                    std::vector<core::GangId>& active, GangMix& rng, int count,
                    absl::Time now);

}  // namespace phalanx::perf

#endif  // PHALANX_BENCH_PERF_WORKLOAD_H_
