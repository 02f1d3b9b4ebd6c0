// What-if replays: a daemon's exported history (`phalanxctl history export`)
// replayed under its own configuration and candidates, on its own queues.
// Reads the files `phalanxctl config get` and `queues list -o json` write
// (proto3 JSON, through proto/startup_files.h, as the daemon's --config and
// --queues), and writes the per-queue comparison and, when the history
// recorded first starts, how far the replay's starts are from them.
// Pure functions but for the file reads; thread-compatible.
#ifndef PHALANX_BENCH_SIM_WHATIF_H_
#define PHALANX_BENCH_SIM_WHATIF_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/sim/report.h"
#include "bench/sim/trace.h"
#include "core/model.h"

namespace phalanx::bench {

// A configuration read from a file: its name (the file's base name without
// extension) and the core configuration.
struct NamedConfig {
  std::string name;
  core::Config config;
};

// Reads `path` as the JSON of phalanx.v1.Config. NotFound when unreadable;
// InvalidArgument naming the path and the field for a bad document or a
// value core refuses.
absl::StatusOr<NamedConfig> ReadConfigFile(const std::string& path);

// Reads `path` as the JSON of phalanx.v1.ListQueuesResponse. Errors as
// ReadConfigFile.
absl::StatusOr<std::vector<core::Queue>> ReadQueuesFile(
    const std::string& path);

// Per job: its first start under `outcome` minus the start the history
// recorded (TraceJob::recorded_start); nullopt where either is missing.
std::vector<std::optional<absl::Duration>> StartErrors(
    const std::vector<TraceJob>& jobs, const PolicyOutcome& outcome);

// One row a job with a recorded start: gang_id (else the trace line),
// queue, GPUs, the recorded start and each policy's first start, in
// seconds since the epoch (empty where the job never started).
std::string StartsCsv(const std::vector<TraceJob>& jobs,
                      const std::vector<PolicyOutcome>& outcomes);

// One row a queue (the jobs' `cluster`), one column group a policy: jobs
// finished, wait p50 and p95 in hours, the p95 wait of gangs of >= 64 GPUs,
// GPU-hours of finished work, preemptions; every policy after the first
// also as the difference from the first. Markdown and CSV.
std::string QueuesMarkdown(const std::vector<TraceJob>& jobs,
                           const std::vector<PolicyOutcome>& outcomes);
std::string QueuesCsv(const std::vector<TraceJob>& jobs,
                      const std::vector<PolicyOutcome>& outcomes);

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_SIM_WHATIF_H_
