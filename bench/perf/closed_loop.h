// RunClosedLoop: N client threads, each calling an operation back to back
// (closed loop) until a time limit or a count limit, with per-call latency.
// Used for durable submits, raw RocksDB writes and reads. Thread-safe: `op`
// is called concurrently from `clients` threads.
#ifndef PHALANX_BENCH_PERF_CLOSED_LOOP_H_
#define PHALANX_BENCH_PERF_CLOSED_LOOP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/json.h"
#include "bench/stats.h"

namespace phalanx::perf {

struct ClosedLoopResult {
  int clients = 0;
  int64_t ops = 0;     // calls that returned OK
  int64_t errors = 0;  // calls that did not
  double seconds = 0;  // wall time from the first call to the last return
  double ops_per_sec = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  std::string first_error;
  std::vector<double> latencies_ms;  // every call's; not in ToJson

  bench::JsonObject ToJson() const;
  // Adds `other` (another round of the same test): sums the counts and
  // times, recomputes the rate and percentiles over both.
  void Merge(const ClosedLoopResult& other);
};

// One call of client `client`'s `index`-th operation.
using Operation = std::function<absl::Status(int client, int64_t index)>;

// Runs `clients` threads, each calling `op` until `seconds` have passed or
// it has made `max_ops_per_client` calls.
ClosedLoopResult RunClosedLoop(int clients, double seconds,
                               int64_t max_ops_per_client, const Operation& op);

}  // namespace phalanx::perf

#endif  // PHALANX_BENCH_PERF_CLOSED_LOOP_H_
