// phalanx-scale-restart: restart time of phalanxd at scale.
// For each count N of `--stored` gangs: a fleet of N × `--active_fraction`
// ÷ 8 nodes, filled by that many ADMITTED one-GPU gangs, and the rest of the
// N gangs PENDING (they cannot fit, so the first cycle admits nothing);
// limits.max_pending_gangs_per_queue raised to 10M. The store is written
// with the daemon's own code (restart.h), then phalanxd is timed from fork
// to its first answered RPC, `--runs` times; the same fleet with an empty
// store gives the RSS baseline (rss_bytes_per_stored_gang). One JSON object.
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/json.h"
#include "bench/perf/restart.h"
#include "bench/perf/workload.h"
#include "bench/stats.h"

ABSL_FLAG(std::string, phalanxd, PHALANXD_PATH, "phalanxd binary");
ABSL_FLAG(std::string, stored, "10000,100000,1000000",
          "Stored gangs, one restart series each");
ABSL_FLAG(double, active_fraction, 0.4, "Share of the stored gangs ADMITTED");
ABSL_FLAG(int, runs, 3, "Restarts to time per count");
ABSL_FLAG(double, start_timeout, 600, "Seconds a start may take");
ABSL_FLAG(std::string, out, "", "Write the JSON here (default: stdout)");
ABSL_FLAG(std::string, tmp, "/tmp", "Where the temporary directories go");

namespace phalanx::perf {
namespace {

void Log(const std::string& message) {
  std::fprintf(stderr, "phalanx-scale-restart: %s\n", message.c_str());
}

// One restart series in a fresh directory under `root`, removed after.
absl::StatusOr<RestartResult> Series(const std::string& root, int active,
                                     int pending, int nodes, int runs) {
  RestartOptions options;
  options.phalanxd = absl::GetFlag(FLAGS_phalanxd);
  options.dir = absl::StrCat(root, "/restart-", active, "-", pending);
  options.gangs = active;
  options.pending = pending;
  options.nodes = nodes;
  options.runs = runs;
  options.start_timeout_seconds = absl::GetFlag(FLAGS_start_timeout);
  options.max_pending_per_queue = 10'000'000;
  std::filesystem::create_directories(options.dir);
  absl::StatusOr<RestartResult> result = RunRestart(options);
  std::error_code error;
  std::filesystem::remove_all(options.dir, error);
  return result;
}

bench::JsonObject Point(const std::string& root, int stored) {
  const double fraction = absl::GetFlag(FLAGS_active_fraction);
  const int active = static_cast<int>(stored * fraction);
  const int nodes = std::max(1, (active + kGpusPerNode - 1) / kGpusPerNode);
  bench::JsonObject json;
  json.Add("stored_gangs", stored).Add("nodes", nodes);
  Log(absl::StrFormat("%d nodes, empty store", nodes));
  absl::StatusOr<RestartResult> empty = Series(root, 0, 0, nodes, 1);
  Log(absl::StrFormat("%d nodes, %d active + %d pending gangs", nodes, active,
                      stored - active));
  absl::StatusOr<RestartResult> full =
      Series(root, active, stored - active, nodes, absl::GetFlag(FLAGS_runs));
  if (!empty.ok() || !full.ok()) {
    const absl::Status& status = !full.ok() ? full.status() : empty.status();
    Log(status.ToString());
    json.Add("error", status.ToString());
    return json;
  }
  json.Add("empty_store", empty->ToJson())
      .Add("restart", full->ToJson())
      .Add(
          "rss_bytes_per_stored_gang",
          stored > 0
              ? static_cast<double>(full->rss_bytes - empty->rss_bytes) / stored
              : 0.0);
  return json;
}

}  // namespace
}  // namespace phalanx::perf

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::string pattern = absl::GetFlag(FLAGS_tmp) + "/phalanx-scale-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  phalanx::bench::JsonObject json;
  for (absl::string_view text :
       absl::StrSplit(absl::GetFlag(FLAGS_stored), ',')) {
    int stored = 0;
    if (!absl::SimpleAtoi(text, &stored) || stored < 0) {
      std::fprintf(stderr, "--stored: not a count: %s\n",
                   std::string(text).c_str());
      return 2;
    }
    json.Add(absl::StrCat("stored_", stored),
             phalanx::perf::Point(pattern, stored));
  }
  std::error_code error;
  std::filesystem::remove_all(pattern, error);
  const std::string text = json.Dump() + "\n";
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  std::ofstream file(out);
  file << text;
  return file ? 0 : 1;
}
