#include "bench/perf/restart.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/perf/daemon_files.h"
#include "bench/perf/daemon_process.h"
#include "bench/perf/workload.h"
#include "core/scheduler.h"
#include "core/status_macros.h"
#include "core/validate.h"
#include "server/startup.h"
#include "storage/rocksdb_store.h"

namespace phalanx::perf {
namespace {

using Clock = std::chrono::steady_clock;

// The `index`-th one-GPU gang, PENDING on a full fleet: its reason is the
// one phalanxd stores once a cycle stopped before it for want of a free GPU.
std::shared_ptr<core::Gang> PendingGang(int index, int64_t revision,
                                        absl::Time now) {
  auto gang = std::make_shared<core::Gang>();
  gang->id = core::GangId(absl::StrFormat("g-%06d", index + 1));
  gang->spec =
      SpecOf(ShapeMix()[0], absl::StrFormat("team-%d", index % kTeams), 0);
  core::NormalizeGangSpec(gang->spec);
  gang->reason = core::kNoFreeGpuReason;
  gang->submit_time = now;
  gang->revision = revision;
  return gang;
}

// One ADMITTED one-GPU gang: the `index`-th GPU of the fleet.
core::GangPtr AdmittedGang(int index, int64_t revision, absl::Time now) {
  std::shared_ptr<core::Gang> gang = PendingGang(index, revision, now);
  gang->reason.clear();
  gang->state = core::GangState::kAdmitted;
  gang->admit_time = now;
  gang->attempts = 1;
  core::PodPlacement pod;
  pod.pod_set = gang->spec.pod_sets[0].name;
  pod.node = core::NodeId(absl::StrFormat("n-%05d", index / kGpusPerNode));
  pod.gpu_indices = {index % kGpusPerNode};
  gang->placement.push_back(std::move(pod));
  return gang;
}

// Writes `gangs` ADMITTED one-GPU gangs (and their ADMITTED events), then
// `pending` PENDING ones (and their SUBMITTED events), into the store at
// `data_dir` after the start-up files, in commits of at most 100k gangs.
// Placing 100k gangs through Scheduler::Submit and RunCycle would take
// minutes at 12,500 nodes (see bench/perf/README.md); phalanxd checks every
// placement when it restores.
absl::StatusOr<int> PrepareStore(const DaemonFiles& files,
                                 const std::string& data_dir, int gangs,
                                 int pending) {
  ASSIGN_OR_RETURN(auto startup, server::ReadStartupFiles(
                                     files.config, files.fleet, files.queues));
  ASSIGN_OR_RETURN(auto store, storage::RocksDbStore::Open(data_dir));
  const absl::Time now = absl::Now();
  ASSIGN_OR_RETURN(auto scheduler,
                   server::RecoverAndApply(*store, startup, now));
  const int64_t base = scheduler->revision();
  constexpr int kBatch = 100'000;
  const int total = gangs + pending;
  for (int first = 0; first < total; first += kBatch) {
    core::Mutation mutation;
    const int last = std::min(total, first + kBatch);
    for (int i = first; i < last; ++i) {
      const int64_t revision = base + i + 1;
      const bool admitted = i < gangs;
      core::GangPtr gang = admitted ? AdmittedGang(i, revision, now)
                                    : PendingGang(i, revision, now);
      mutation.events.push_back(core::Event{
          revision,
          admitted ? core::EventType::kAdmitted : core::EventType::kSubmitted,
          now, gang});
      mutation.gangs_put.push_back(std::move(gang));
    }
    mutation.meta.last_revision = base + last;
    mutation.meta.next_gang_seq = last + 1;
    RETURN_IF_ERROR(store->Commit(mutation));
  }
  return gangs;
}

int64_t DirectoryBytes(const std::string& dir) {
  int64_t bytes = 0;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(dir, error)) {
    if (entry.is_regular_file(error)) bytes += entry.file_size(error);
  }
  return bytes;
}

}  // namespace

bench::JsonObject RestartResult::ToJson() const {
  bench::JsonObject runs;
  for (size_t i = 0; i < seconds_to_serving.size(); ++i) {
    runs.Add(absl::StrCat("run_", i + 1),
             bench::JsonObject()
                 .Add("seconds_to_address", seconds_to_address[i])
                 .Add("seconds_to_serving", seconds_to_serving[i])
                 .Add("cpu_seconds_to_serving", cpu_seconds_to_serving[i]));
  }
  bench::JsonObject json;
  json.Add("nodes", nodes)
      .Add("active_gangs", active_gangs)
      .Add("pending_gangs", pending_gangs)
      .Add("store_bytes", store_bytes)
      .Add("prepare_seconds", prepare_seconds)
      .Add("median_seconds_to_serving", median_seconds)
      .Add("median_cpu_seconds_to_serving", median_cpu_seconds)
      .Add("rss_bytes", rss_bytes)
      .Add("runs", runs);
  return json;
}

absl::StatusOr<RestartResult> RunRestart(const RestartOptions& options) {
  RestartResult result;
  result.nodes =
      options.nodes > 0
          ? options.nodes
          : std::max(1, (options.gangs + kGpusPerNode - 1) / kGpusPerNode);
  if (options.gangs > result.nodes * kGpusPerNode) {
    return absl::InvalidArgumentError(
        absl::StrFormat("restart: %d one-GPU gangs do not fit %d nodes",
                        options.gangs, result.nodes));
  }
  core::Config config = BenchConfig();
  if (options.max_pending_per_queue > 0) {
    config.limits.max_pending_gangs_per_queue = options.max_pending_per_queue;
  }
  ASSIGN_OR_RETURN(DaemonFiles files,
                   WriteDaemonFiles(options.dir, result.nodes, config));
  const std::string data_dir = options.dir + "/data";
  const Clock::time_point start = Clock::now();
  ASSIGN_OR_RETURN(
      result.active_gangs,
      PrepareStore(files, data_dir, options.gangs, options.pending));
  result.pending_gangs = options.pending;
  result.prepare_seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  result.store_bytes = DirectoryBytes(data_dir);
  for (int run = 0; run < options.runs; ++run) {
    PhalanxdProcess daemon(options.phalanxd, data_dir, files.Args());
    if (!daemon.Start(options.start_timeout_seconds)) {
      return absl::InternalError(
          absl::StrCat("phalanxd did not start: ", daemon.output()));
    }
    result.seconds_to_address.push_back(daemon.seconds_to_address());
    result.seconds_to_serving.push_back(daemon.seconds_to_serving());
    result.cpu_seconds_to_serving.push_back(CpuSecondsOf(daemon.pid()));
    result.rss_bytes = daemon.RssBytes();
    daemon.Terminate();
    result.daemon_output = daemon.output();
  }
  std::vector<double> serving = result.seconds_to_serving;
  result.median_seconds = bench::Percentile(serving, 50);
  std::vector<double> cpu = result.cpu_seconds_to_serving;
  result.median_cpu_seconds = bench::Percentile(cpu, 50);
  return result;
}

}  // namespace phalanx::perf
