// Measurements of one replay: the accumulator the replay engine
// feeds with runs, waits and fleet states, the statistics helpers it uses
// (mean and percentiles, Jain's index), and the time series
// behind the plot. Not thread-safe; one accumulator per replay.
#ifndef PHALANX_BENCH_SIM_SIM_METRICS_H_
#define PHALANX_BENCH_SIM_SIM_METRICS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"

namespace phalanx::bench {

struct Distribution {
  double mean = 0;
  double p50 = 0;
  double p95 = 0;
  double p99 = 0;
};

// Mean and percentiles of `values` (bench/stats.h's PercentileOfSorted:
// rank = p/100 · (n − 1), as numpy's default); nullopt when empty.
std::optional<Distribution> Summarize(std::vector<double> values);

// Jain's fairness index (Σx)² / (n · Σx²); nullopt for no values, 1 when
// every value is 0.
std::optional<double> JainIndex(const std::vector<double>& values);

// The fleet as it stands between two steps of a replay.
struct FleetSample {
  int64_t allocated_gpus = 0;
  int64_t pending_gangs = 0;
  int64_t running_gangs = 0;
  int64_t free_whole_nodes = 0;
  double node_fragmentation = 0;  // core::DescribeFleet's figure
  // GPUs of pending multi-node gangs for which enough idle whole nodes
  // exist in total, not counting nodes held for another gang
  // (reservations, preemptions in progress).
  int64_t blocked_gpus = 0;
};

// One row of the time series: time-weighted means over a bucket.
struct SeriesRow {
  double hours = 0;  // bucket start, since the first submit
  double utilization = 0;
  double allocated_gpus = 0;
  double pending_gangs = 0;
  double running_gangs = 0;
  double free_whole_nodes = 0;
  double node_fragmentation = 0;
};

// What one replay measured; optional fields are null where a set is empty.
struct PolicyMetrics {
  int64_t jobs = 0;
  int64_t finished = 0;
  int64_t rejected = 0;  // could never fit the fleet (Submit refused them)
  std::optional<double> utilization;
  std::optional<Distribution> wait_seconds;
  std::optional<Distribution> large_wait_seconds;
  std::optional<Distribution> high_priority_wait_seconds;
  // Jobs of at least a quarter of the fleet's GPUs: their waits, and the
  // longest.
  std::optional<Distribution> quarter_fleet_wait_seconds;
  std::optional<double> quarter_fleet_longest_wait_seconds;
  // The longest wait per size class (kSizeClasses order; null when the
  // class had no finished job).
  std::vector<std::optional<double>> longest_wait_seconds_by_size;
  std::optional<double> fragmentation_node;
  double blocked_gpu_hours = 0;
  std::optional<double> goodput_utilization;
  double lost_gpu_hours = 0;
  double demand_gpu_hours = 0;
  std::optional<double> jain_fairness;
  int64_t preemptions = 0;
  int64_t evictions = 0;
  int64_t checkpoints = 0;    // reported by the simulated launcher
  int64_t node_failures = 0;  // nodes set UNHEALTHY
  int64_t repairs = 0;        // gangs repaired in place after a failure
  // Elastic gangs (core/elastic.h): jobs submitted elastic, admissions at
  // fewer pods than their maximum, and resizes (RESIZED events: grown, or
  // shrunk instead of preempted). A shrink is not counted in preemptions.
  int64_t elastic_jobs = 0;
  int64_t elastic_admitted_below_full = 0;
  int64_t grows = 0;
  int64_t shrinks = 0;
  double sim_seconds = 0;
};

// Accumulates a replay. The arrival window [begin, end] (first to last
// submit) bounds utilization, goodput, fragmentation and fairness.
class MetricsAccumulator {
 public:
  MetricsAccumulator(absl::Time window_begin, absl::Time window_end,
                     int64_t capacity_gpus, int teams,
                     absl::Duration bucket_width);

  // The fleet held `sample` from `from` to `to`.
  void AddInterval(absl::Time from, absl::Time to, const FleetSample& sample);
  // A run of `gpus` GPUs from `start` to `end` whose work up to `kept_until`
  // counts (its end when it completed, its last checkpoint — or its start —
  // when preemption, eviction or a failure threw the rest away).
  void AddRun(int team, int64_t gpus, absl::Time start, absl::Time end,
              absl::Time kept_until);
  // A job of the trace: its demand, and what it would have received in the
  // window had it started on arrival (`accepted` = Submit took it).
  void AddJob(int team, int64_t gpus, absl::Time submit,
              absl::Duration duration, bool accepted);
  // A finished job's total time pending (of a job of `requested_gpus`; a
  // quarter of the capacity or more counts as quarter-fleet).
  void AddWait(absl::Duration wait, int requested_gpus, int priority);
  void AddPreemption() { ++metrics_.preemptions; }
  void AddEviction() { ++metrics_.evictions; }
  void AddCheckpoint() { ++metrics_.checkpoints; }
  void AddNodeFailure() { ++metrics_.node_failures; }
  void AddRepair() { ++metrics_.repairs; }
  void AddFinished() { ++metrics_.finished; }
  void AddElasticJob() { ++metrics_.elastic_jobs; }
  void AddAdmittedBelowFull() { ++metrics_.elastic_admitted_below_full; }
  void AddGrow() { ++metrics_.grows; }
  void AddShrink() { ++metrics_.shrinks; }

  // The metrics (sim_seconds left 0 for the caller).
  PolicyMetrics Finish() const;
  // Time-series rows from the window's start to the last interval.
  std::vector<SeriesRow> Series() const;

 private:
  // Seconds of [from, to] inside the window.
  double InWindow(absl::Time from, absl::Time to) const;
  void AddToSeries(absl::Time from, absl::Time to, const FleetSample& sample);

  absl::Time begin_;
  absl::Time end_;
  int64_t capacity_gpus_;
  absl::Duration bucket_;
  PolicyMetrics metrics_;
  double allocated_gpu_seconds_ = 0;
  double kept_gpu_seconds_ = 0;
  double lost_gpu_seconds_ = 0;
  double blocked_gpu_seconds_ = 0;
  double fragmentation_seconds_ = 0;  // ∫ fragmentation dt over the window
  std::vector<double> received_;      // per team, in the window
  std::vector<double> ideal_;         // per team, in the window
  std::vector<double> waits_;
  std::vector<double> large_waits_;
  std::vector<double> high_priority_waits_;
  std::vector<double> quarter_fleet_waits_;
  std::vector<std::optional<double>> longest_by_size_;
  std::vector<SeriesRow> sums_;  // per bucket: ∫ value dt
  std::vector<double> bucket_seconds_;
};

// Gangs of at least this many GPUs count as large.
inline constexpr int kLargeGangGpus = 64;

// Size classes of the longest waits: GPUs in [min_gpus, next class's).
struct SizeClass {
  const char* name;
  int min_gpus;
};
inline constexpr SizeClass kSizeClasses[] = {
    {"1-8", 1},       {"9-63", 9},       {"64-255", 64},
    {"256-511", 256}, {"512-1023", 512}, {"1024+", 1024}};
inline constexpr int kSizeClassCount =
    sizeof(kSizeClasses) / sizeof(kSizeClasses[0]);

// The index in kSizeClasses of a job of `gpus` GPUs (0 for 0 or fewer).
int SizeClassOf(int gpus);

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_SIM_SIM_METRICS_H_
