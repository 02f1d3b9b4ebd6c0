#include "bench/perf/restart.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/perf/daemon_files.h"
#include "bench/perf/daemon_process.h"
#include "bench/perf/workload.h"
#include "core/status_macros.h"
#include "server/startup.h"
#include "storage/rocksdb_store.h"

namespace phalanx::perf {
namespace {

using Clock = std::chrono::steady_clock;

// Admits `gangs` one-GPU gangs into the store at `data_dir`; returns how
// many are active.
absl::StatusOr<int> PrepareStore(const DaemonFiles& files,
                                 const std::string& data_dir, int gangs) {
  ASSIGN_OR_RETURN(auto startup, server::ReadStartupFiles(
                                     files.config, files.fleet, files.queues));
  ASSIGN_OR_RETURN(auto store, storage::RocksDbStore::Open(data_dir));
  const absl::Time now = absl::Now();
  ASSIGN_OR_RETURN(auto scheduler,
                   server::RecoverAndApply(*store, startup, now));
  for (int i = 0; i < gangs; ++i) {
    core::GangSpec spec =
        SpecOf(ShapeMix()[0], absl::StrFormat("team-%d", i % kTeams), 0);
    spec.request_id = absl::StrFormat("restart-%d", i);
    RETURN_IF_ERROR(scheduler->Submit(std::move(spec), now).status());
  }
  scheduler->RunCycle(now);
  RETURN_IF_ERROR(store->Commit(scheduler->TakeMutation()));
  int active = 0;
  for (const auto& [key, count] : scheduler->gang_counts()) {
    if (core::HoldsCapacity(key.second)) active += static_cast<int>(count);
  }
  return active;
}

}  // namespace

JsonObject RestartResult::ToJson() const {
  JsonObject runs;
  for (size_t i = 0; i < seconds_to_serving.size(); ++i) {
    runs.Add(absl::StrCat("run_", i + 1),
             JsonObject()
                 .Add("seconds_to_address", seconds_to_address[i])
                 .Add("seconds_to_serving", seconds_to_serving[i]));
  }
  JsonObject json;
  json.Add("nodes", nodes)
      .Add("active_gangs", active_gangs)
      .Add("prepare_seconds", prepare_seconds)
      .Add("median_seconds_to_serving", median_seconds)
      .Add("rss_bytes", rss_bytes)
      .Add("runs", runs);
  return json;
}

absl::StatusOr<RestartResult> RunRestart(const RestartOptions& options) {
  RestartResult result;
  result.nodes = (options.gangs + kGpusPerNode - 1) / kGpusPerNode;
  ASSIGN_OR_RETURN(DaemonFiles files,
                   WriteDaemonFiles(options.dir, result.nodes));
  const std::string data_dir = options.dir + "/data";
  const Clock::time_point start = Clock::now();
  ASSIGN_OR_RETURN(result.active_gangs,
                   PrepareStore(files, data_dir, options.gangs));
  result.prepare_seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  for (int run = 0; run < options.runs; ++run) {
    PhalanxdProcess daemon(options.phalanxd, data_dir, files.Args());
    if (!daemon.Start(/*timeout_seconds=*/120)) {
      return absl::InternalError(
          absl::StrCat("phalanxd did not start: ", daemon.output()));
    }
    result.seconds_to_address.push_back(daemon.seconds_to_address());
    result.seconds_to_serving.push_back(daemon.seconds_to_serving());
    result.rss_bytes = daemon.RssBytes();
    daemon.Terminate();
    result.daemon_output = daemon.output();
  }
  std::vector<double> serving = result.seconds_to_serving;
  result.median_seconds = Percentile(serving, 50);
  return result;
}

}  // namespace phalanx::perf
