// The start-up files of a benchmark daemon (docs/design.md §10 formats, proto3
// JSON of the API's messages): a fleet of the workload's nodes, the team queues
// and a config with topology levels block/rack. Written once per run.
#ifndef PHALANX_BENCH_PERF_DAEMON_FILES_H_
#define PHALANX_BENCH_PERF_DAEMON_FILES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model.h"

namespace phalanx::perf {

struct DaemonFiles {
  std::string config;
  std::string fleet;
  std::string queues;
  // --config=… --fleet=… --queues=…
  std::vector<std::string> Args() const;
};

// Writes config.json, fleet.json (`nodes` nodes of MakeFleet) and
// queues.json into `dir`; the config is BenchConfig() or `config`.
absl::StatusOr<DaemonFiles> WriteDaemonFiles(const std::string& dir, int nodes);
absl::StatusOr<DaemonFiles> WriteDaemonFiles(const std::string& dir, int nodes,
                                             const core::Config& config);

}  // namespace phalanx::perf

#endif  // PHALANX_BENCH_PERF_DAEMON_FILES_H_
