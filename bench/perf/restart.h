// Restart with many stored gangs: prepares a data directory in-process with
// the daemon's own code (storage::RocksDbStore and server::RecoverAndApply,
// so the bytes are exactly what phalanxd writes), admits `gangs` one-GPU
// gangs on a fleet just big enough (or of `nodes` nodes), stores `pending`
// more one-GPU gangs PENDING, then times phalanxd from fork to its first
// answered RPC, `runs` times.
#ifndef PHALANX_BENCH_PERF_RESTART_H_
#define PHALANX_BENCH_PERF_RESTART_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/json.h"
#include "bench/stats.h"

namespace phalanx::perf {

struct RestartOptions {
  std::string phalanxd;
  std::string dir;      // a fresh temporary directory
  int gangs = 100'000;  // ADMITTED
  int pending = 0;      // PENDING (after the admitted ones)
  int nodes = 0;        // 0: just enough for `gangs` (at least 1)
  int runs = 1;
  double start_timeout_seconds = 120;
  // The daemon's limits.max_pending_gangs_per_queue (0: the default).
  int64_t max_pending_per_queue = 0;
};

struct RestartResult {
  int nodes = 0;
  int active_gangs = 0;
  int pending_gangs = 0;
  int64_t store_bytes = 0;  // size of the data directory
  double prepare_seconds = 0;
  std::vector<double> seconds_to_address;  // per run
  std::vector<double> seconds_to_serving;  // per run
  // CPU (user + system, all threads) phalanxd used until it served, per run.
  std::vector<double> cpu_seconds_to_serving;
  double median_seconds = 0;      // of seconds_to_serving
  double median_cpu_seconds = 0;  // of cpu_seconds_to_serving
  int64_t rss_bytes = 0;          // after the last start
  std::string daemon_output;      // of the last start

  bench::JsonObject ToJson() const;
};

absl::StatusOr<RestartResult> RunRestart(const RestartOptions& options);

}  // namespace phalanx::perf

#endif  // PHALANX_BENCH_PERF_RESTART_H_
