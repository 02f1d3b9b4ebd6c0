// Trace: the jobs a replay submits, read from a CSV file. One row a
// job; the header names the columns, so their order does not matter:
//   timestamp  submit time, "YYYY-MM-DD HH:MM:SS" (UTC) or seconds
//   duration   run time in seconds (> 0 once admitted, the job runs this long)
//   num_gpus   GPUs the job asks for (a positive integer)
//   cluster    the team; one queue each
//   priority   optional integer (higher first); empty or absent = 0
//   checkpoint_interval_s  optional: run time between the job's
//              checkpoints, seconds (0 = never); empty or absent = the
//              replay's --checkpoint-interval
// The columns `phalanxctl history export` adds (docs/history.md), each
// optional:
//   gang_id    the gang's id in the daemon (kept for per-job reports)
//   state      the gang's state at the export; a CANCELLED or FAILED gang
//              that never started is left out of the replay (ParseTrace
//              skips it: nothing says how long it would have run)
//   pods, gpus_per_pod  the gang's shape, one value per pod set joined by
//              ';' ("4;1" and "8;2": 4 pods of 8 GPUs and 1 of 2); both or
//              neither, Σ pods × gpus_per_pod = num_gpus; absent = derived
//              from num_gpus and the fleet
//   gpu_model  per pod set (';'), the models it accepts joined by '|' in
//              preference order; empty = any
//   topology   per pod set (';'), "required:LEVEL", "preferred:LEVEL" or
//              empty = none
//   start      the gang's recorded first start (timestamp format), or empty
//   complete   1 = the run ended (the default); 0 = it was still running or
//              pending when exported: `duration` is then the run so far,
//              and may be empty
//   estimated_runtime_s, max_runtime_s  what the gang declared; the replay
//              gives the scheduler these instead of drawn estimates, and
//              none to a gang that declared neither
// Other columns (gpu_time, ...) are ignored. Fields may be double-quoted.
// Rows need not be sorted. Pure functions over values; thread-compatible.
#ifndef PHALANX_BENCH_SIM_TRACE_H_
#define PHALANX_BENCH_SIM_TRACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace phalanx::bench {

// One pod set of an exported gang's shape.
struct TracePodSet {
  int count = 0;
  int gpus = 0;                         // a pod
  std::vector<std::string> gpu_models;  // preference order; empty = any
  std::string topology;  // "required:LEVEL", "preferred:LEVEL" or empty
};

struct TraceJob {
  int64_t line = 0;  // 1-based line in the file (the header is line 1); 0 =
                     // generated
  absl::Time submit_time;
  absl::Duration duration;
  int gpus = 0;
  std::string team;
  int priority = 0;
  std::optional<absl::Duration> checkpoint_interval;  // unset = the default
  // Columns of an exported history (see above); unset when absent.
  std::string gang_id;
  std::vector<TracePodSet> pod_sets;  // empty = derive the shape from `gpus`
  std::optional<absl::Time> recorded_start;
  bool complete = true;  // false: `duration` is the run so far (maybe 0)
  std::optional<absl::Duration> declared_estimate;     // estimated_runtime_s
  std::optional<absl::Duration> declared_max_runtime;  // max_runtime_s
  // The trace has the estimated_runtime_s column: an empty value then means
  // the gang declared no estimate, not an unknown one.
  bool runtimes_recorded = false;
  // Elastic (core/elastic.h): the gang may run on as few as half the pods
  // of its largest pod set (ElasticMinimum), and grow back. `duration` is
  // its run time at full size; at fewer pods the same work takes longer
  // in proportion. Set by MakeElastic, never read from a trace file.
  bool elastic = false;
};

// Gives every incomplete job (TraceJob::complete false) a duration for the
// replay: its run so far or, when longer, what it was expected to run — its
// declared estimate, else its declared max runtime, else `default_runtime`
// (what the daemon's plan assumes, planning.default_runtime).
void ResolveOpenRuns(std::vector<TraceJob>& jobs,
                     absl::Duration default_runtime);

// Parses CSV text into jobs in file order. Blank lines are skipped. Fails with
// InvalidArgument "line N: <column>: ..." for a malformed row, and "line 1:
// ..." when a required column is missing from the header.
absl::StatusOr<std::vector<TraceJob>> ParseTrace(absl::string_view text);

// Reads and parses the CSV file at `path`. NotFound when it cannot be read;
// otherwise as ParseTrace, with the path prefixed to the message.
absl::StatusOr<std::vector<TraceJob>> ReadTrace(const std::string& path);

// Splits one CSV line into fields: commas separate, a double-quoted field may
// hold commas and "" for a quote; a trailing '\r' is dropped.
std::vector<std::string> SplitCsvLine(absl::string_view line);

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_SIM_TRACE_H_
