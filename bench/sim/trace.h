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

struct TraceJob {
  int64_t line = 0;  // 1-based line in the file (the header is line 1); 0 =
                     // generated
  absl::Time submit_time;
  absl::Duration duration;
  int gpus = 0;
  std::string team;
  int priority = 0;
  std::optional<absl::Duration> checkpoint_interval;  // unset = the default
};

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
