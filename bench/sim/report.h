// Output of phalanx-sim: summary.json, summary.md (the same as a
// table), one time-series CSV per policy, and the plot drawn by plot.py.
// The text builders are pure (same input, same bytes); the writers touch
// only the output directory. Thread-compatible.
#ifndef PHALANX_BENCH_SIM_REPORT_H_
#define PHALANX_BENCH_SIM_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bench/sim/replay.h"
#include "bench/sim/sim_metrics.h"
#include "bench/sim/trace.h"

namespace phalanx::bench {

// What was replayed, on what.
struct RunMeta {
  std::string trace;  // the trace file, or "synthetic"
  std::optional<uint64_t> synthetic_seed;
  double synthetic_days = 0;
  double synthetic_load = 0;
  std::string synthetic_profile;     // "" for the default mix (lab)
  double elastic_fraction = 0;       // of the gangs of >= 64 GPUs
  uint64_t seed = 0;                 // of the runtime estimates
  double checkpoint_interval_s = 0;  // the default; 0 = never
  double node_mtbf_hours = 0;        // 0 = nodes never fail
  double node_repair_hours = 0;
  uint64_t failure_seed = 0;
  int64_t jobs = 0;
  int64_t teams = 0;
  absl::Time first_submit;
  absl::Time last_submit;
  std::string fleet_source;  // "flags" or the fleet file
  int64_t nodes = 0;
  int64_t gpus = 0;
  int gpus_per_node = 0;
  int nodes_per_rack = 0;
  int nodes_per_block = 0;
  std::vector<std::string> levels;
  std::vector<std::pair<std::string, int64_t>> gpus_by_model;
};

// One policy's outcome; `metrics` is nullopt when it was unavailable (core
// lacks a feature) or not finished (stopped by a time limit).
struct PolicyOutcome {
  std::string name;
  std::optional<PolicyMetrics> metrics;
  bool not_finished = false;       // set with metrics nullopt: stopped
  std::string unavailable_reason;  // why metrics is nullopt
  std::vector<SeriesRow> series;
  std::string events_csv;   // written as events-<name>.csv when not empty
  std::string elastic_csv;  // written as elastic-<name>.csv when not empty
  // Per job, its wait when it finished (ReplayResult::waits).
  std::vector<std::optional<absl::Duration>> waits;
  // Per job, first start minus the start planned at its submit (with
  // --plan-accuracy; ReplayResult::plan_errors).
  std::vector<std::optional<absl::Duration>> plan_errors;
  // Per job: its first start, if any, and how often it was preempted.
  std::vector<std::optional<absl::Time>> first_starts;
  std::vector<int> preemptions;
};

// Per policy and size class, the median and p90 of the absolute value of
// per-job errors (`errors[p][job]`, nullopt = no figure for that job), in
// hours, as a Markdown table whose count column is headed `counted`.
std::string AbsErrorBySizeMarkdown(
    const std::vector<PolicyOutcome>& outcomes,
    const std::vector<std::vector<std::optional<absl::Duration>>>& errors,
    const std::vector<int64_t>& job_gpus, absl::string_view counted);

// With --plan-accuracy: per policy and size class, how far the start the
// plan gave a job at its submit was from its first start.
std::string PlanAccuracyMarkdown(const std::vector<PolicyOutcome>& outcomes,
                                 const std::vector<int64_t>& job_gpus);

// {"meta": {...}, "policies": {"<name>": {...}}}; a policy without metrics
// has "available": false, "status" "unavailable" or "not finished", its
// reason, and every metric null.
std::string SummaryJson(const RunMeta& meta,
                        const std::vector<PolicyOutcome>& outcomes);
// A Markdown table: one row a metric, one column a policy.
std::string SummaryMarkdown(const RunMeta& meta,
                            const std::vector<PolicyOutcome>& outcomes);
// hours,utilization,allocated_gpus,pending_gangs,running_gangs,
// free_whole_nodes,node_fragmentation — one row a bucket.
std::string SeriesCsv(const std::vector<SeriesRow>& rows);
// The file name of a policy's series: "timeseries-<name>.csv".
std::string SeriesFileName(const std::string& policy);

// time_hours,event,job_line,team,gpus,priority,reason — one row an event;
// hours since `origin`; job_line is the trace line (or index for generated
// jobs).
std::string EventsCsv(const std::vector<EventRecord>& events,
                      const std::vector<TraceJob>& jobs, absl::Time origin);

// job_line,team,gpus,priority,submit_hours,wait_hours,first_gpus,resizes,
// run_hours — one row per elastic job (TraceJob::elastic) of `result`: its
// total wait and the time from its first start to its end (empty when it
// did not finish), the GPUs it first started on, its resizes; hours since
// `origin`. Only the header when no job is elastic.
std::string ElasticCsv(const std::vector<TraceJob>& jobs,
                       const ReplayResult& result, absl::Time origin);

// Writes `text` to the file `path` (replacing it). Internal naming the file
// when it cannot be written.
absl::Status WriteFile(const std::string& path, const std::string& text);

// Writes summary.json, summary.md, the series CSVs and any event logs into
// `dir` (created when missing). Internal on an I/O failure, naming the file.
absl::Status WriteReports(const std::string& dir, const RunMeta& meta,
                          const std::vector<PolicyOutcome>& outcomes);

// Runs `python` on `script` with `dir` as its argument (it reads the CSVs
// there and writes plot.png). FailedPrecondition when either file is
// missing; Internal when the script fails.
absl::Status RunPlot(const std::string& python, const std::string& script,
                     const std::string& dir);

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_SIM_REPORT_H_
