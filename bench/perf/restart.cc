#include "bench/perf/restart.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/perf/daemon_files.h"
#include "bench/perf/daemon_process.h"
#include "bench/perf/workload.h"
#include "core/status_macros.h"
#include "core/validate.h"
#include "server/startup.h"
#include "storage/rocksdb_store.h"

namespace phalanx::perf {
namespace {

using Clock = std::chrono::steady_clock;

// One ADMITTED one-GPU gang: the `index`-th GPU of the fleet.
core::GangPtr AdmittedGang(int index, int64_t revision, absl::Time now) {
  auto gang = std::make_shared<core::Gang>();
  gang->id = core::GangId(absl::StrFormat("g-%06d", index + 1));
  gang->spec =
      SpecOf(ShapeMix()[0], absl::StrFormat("team-%d", index % kTeams), 0);
  core::NormalizeGangSpec(gang->spec);
  gang->state = core::GangState::kAdmitted;
  gang->submit_time = now;
  gang->admit_time = now;
  gang->attempts = 1;
  gang->revision = revision;
  core::PodPlacement pod;
  pod.pod_set = gang->spec.pod_sets[0].name;
  pod.node = core::NodeId(absl::StrFormat("n-%05d", index / kGpusPerNode));
  pod.gpu_indices = {index % kGpusPerNode};
  gang->placement.push_back(std::move(pod));
  return gang;
}

// Writes `gangs` ADMITTED one-GPU gangs (and their ADMITTED events) into the
// store at `data_dir`, after the start-up files. Placing 100k gangs through
// Scheduler::Submit and RunCycle would take minutes at 12,500 nodes (see
// bench/perf/README.md); phalanxd checks every placement when it restores.
absl::StatusOr<int> PrepareStore(const DaemonFiles& files,
                                 const std::string& data_dir, int gangs) {
  ASSIGN_OR_RETURN(auto startup, server::ReadStartupFiles(
                                     files.config, files.fleet, files.queues));
  ASSIGN_OR_RETURN(auto store, storage::RocksDbStore::Open(data_dir));
  const absl::Time now = absl::Now();
  ASSIGN_OR_RETURN(auto scheduler,
                   server::RecoverAndApply(*store, startup, now));
  const int64_t base = scheduler->revision();
  core::Mutation mutation;
  for (int i = 0; i < gangs; ++i) {
    core::GangPtr gang = AdmittedGang(i, base + i + 1, now);
    mutation.events.push_back(
        core::Event{base + i + 1, core::EventType::kAdmitted, now, gang});
    mutation.gangs_put.push_back(std::move(gang));
  }
  mutation.meta.last_revision = base + gangs;
  mutation.meta.next_gang_seq = gangs + 1;
  RETURN_IF_ERROR(store->Commit(mutation));
  return gangs;
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
