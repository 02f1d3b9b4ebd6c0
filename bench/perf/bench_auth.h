// The --auth file of a benchmark daemon (docs/security.md): one tenant
// principal, "bench-launcher", scoped to the workload's cohort (so every
// team queue), with the request rate and watch-stream cap raised so the
// benchmark measures the path, not the limits. Written once per run.
// Stateless; thread-safe.
#ifndef PHALANX_BENCH_PERF_BENCH_AUTH_H_
#define PHALANX_BENCH_PERF_BENCH_AUTH_H_

#include <string>

#include "absl/status/statusor.h"

namespace phalanx::perf {

struct BenchAuth {
  std::string path;   // the --auth file
  std::string token;  // the principal's bearer token
};

// Writes `dir`/auth.json with a fresh token (from /dev/urandom).
absl::StatusOr<BenchAuth> WriteBenchAuth(const std::string& dir);

}  // namespace phalanx::perf

#endif  // PHALANX_BENCH_PERF_BENCH_AUTH_H_
