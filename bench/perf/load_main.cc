// phalanx-load: measures the daemon over real gRPC against its physical
// limits, in one run — durable SubmitGang vs raw RocksDB sync writes at the
// same concurrency and value size and vs an empty unary RPC on the same
// gRPC server set-up (phalanx-empty-rpc), GetGang reads, Watch fan-out,
// resident memory per pending gang, and restart time with many active gangs.
// Starts its own phalanxd (loopback, temporary directory, removed after) and
// writes one JSON object (bench/run.sh folds it into
// bench/results/latest.json). With --auth (the default) every call carries a
// bearer token of a tenant principal, as launchers run it (docs/security.md).
#include <dirent.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "baseline.grpc.pb.h"
#include "bench/json.h"
#include "bench/perf/bench_auth.h"
#include "bench/perf/closed_loop.h"
#include "bench/perf/daemon_files.h"
#include "bench/perf/daemon_process.h"
#include "bench/perf/raw_rocksdb.h"
#include "bench/perf/restart.h"
#include "bench/perf/watch_fanout.h"
#include "bench/perf/workload.h"
#include "bench/stats.h"
#include "phalanx/v1/scheduler.grpc.pb.h"

ABSL_FLAG(std::string, phalanxd, PHALANXD_PATH, "phalanxd binary");
ABSL_FLAG(std::string, empty_rpc, EMPTY_RPC_PATH,
          "phalanx-empty-rpc binary (the empty unary RPC baseline)");
ABSL_FLAG(bool, auth, true,
          "Run the daemon (and the baseline) with --auth: every call sends a "
          "tenant's bearer token");
ABSL_FLAG(bool, quick, false, "Shorter phases and smaller sizes");
ABSL_FLAG(std::string, clients, "1,8,64", "Concurrencies of the submit test");
ABSL_FLAG(double, seconds, -1, "Seconds per measured phase (-1: 2 quick, 5)");
ABSL_FLAG(int, pending_target, -1,
          "Pending gangs for the memory figure (-1: 20000 quick, 100000)");
ABSL_FLAG(int, prefill, 0,
          "Pending gangs to submit (64 clients) before the submit test, so "
          "it runs against a daemon holding that many");
ABSL_FLAG(int, watchers, 1000, "Watch streams");
ABSL_FLAG(std::string, watch_rates, "50,500",
          "Events a second during the watch test, one run each");
ABSL_FLAG(int, restart_gangs, 100000, "Active gangs for the restart test");
ABSL_FLAG(int, restart_runs, -1, "Restarts to time (-1: 1 quick, 3)");
ABSL_FLAG(std::string, out, "", "Write the JSON here (default: stdout)");
ABSL_FLAG(std::string, tmp, "/tmp", "Where the temporary directory goes");
ABSL_FLAG(bool, submit_only, false,
          "Run only the submit phases (warm-up, prefill, submit vs limits, "
          "batching): no memory, GetGang, watch or restart phase");
ABSL_FLAG(bool, watch_only, false,
          "Run only the warm-up, the prefill (--prefill) and the watch "
          "fan-out runs (--watch_rates): for A/B runs of the watch path");
ABSL_FLAG(std::string, server_cpus, "",
          "CPUs (comma-separated) to pin phalanxd and phalanx-empty-rpc to, "
          "every thread (\"\": no pinning)");
ABSL_FLAG(std::string, client_cpus, "",
          "CPUs (comma-separated) to pin this process to — the clients and "
          "the raw RocksDB writers (\"\": no pinning)");

namespace phalanx::perf {
namespace {

constexpr int kDaemonNodes = 64;  // 512 GPUs: 64 one-node gangs fill it
constexpr int kChannels = 8;

void Log(const std::string& message) {
  std::fprintf(stderr, "phalanx-load: %s\n", message.c_str());
}

double SecondsFlag(bool quick) {
  const double seconds = absl::GetFlag(FLAGS_seconds);
  return seconds > 0 ? seconds : (quick ? 2.0 : 5.0);
}

int ByMode(int flag, bool quick, int quick_value, int full_value) {
  return flag >= 0 ? flag : (quick ? quick_value : full_value);
}

// The request of client `client`'s `index`-th submit in round `round`: a
// one-node gang of 8 GPUs with a unique request_id (launchers set one), in
// team queue `client` mod 8.
v1::SubmitGangRequest SubmitRequest(int round, int client, int64_t index) {
  v1::SubmitGangRequest request;
  v1::GangSpec* spec = request.mutable_spec();
  spec->set_queue(absl::StrFormat("team-%d", client % kTeams));
  spec->set_request_id(absl::StrFormat("load-%d-%d-%d", round, client, index));
  v1::PodSet* set = spec->add_pod_sets();
  set->set_name("workers");
  set->set_count(1);
  set->set_gpus(kGpusPerNode);
  return request;
}

// Clients of one daemon: stubs over a few connections, and the ids of the
// gangs they submitted (for reads).
class LoadClients {
 public:
  explicit LoadClients(const PhalanxdProcess& daemon) : daemon_(daemon) {
    for (int c = 0; c < kChannels; ++c) {
      stubs_.push_back(v1::Scheduler::NewStub(daemon.NewChannel(c)));
    }
  }

  // One durable submit (SubmitRequest).
  absl::Status Submit(int client, int64_t index) {
    const v1::SubmitGangRequest request =
        SubmitRequest(round_.load(), client, index);
    grpc::ClientContext context;
    daemon_.Authorize(context);
    v1::SubmitGangResponse response;
    grpc::Status status = Stub(client).SubmitGang(&context, request, &response);
    if (!status.ok()) return absl::UnavailableError(status.error_message());
    // A sample of the responses is kept (serializing every one would be
    // client work the empty-RPC baseline's clients do not do).
    std::string sample;
    const bool sampled = response.gang().state() == v1::GANG_STATE_PENDING &&
                         (index % kSampleEvery == 0 || !have_sample_.load());
    if (sampled) sample = response.SerializeAsString();
    absl::MutexLock lock(&mu_);
    ids_.push_back(response.gang().id());
    if (sampled) {
      last_pending_response_ = std::move(sample);
      have_sample_ = true;
      gang_bytes_ = static_cast<int>(response.gang().ByteSizeLong());
    }
    return absl::OkStatus();
  }

  absl::Status Get(int client, int64_t index) {
    v1::GetGangRequest request;
    {
      absl::MutexLock lock(&mu_);
      request.set_gang_id(
          ids_[(static_cast<uint64_t>(index) * 2654435761u + client) %
               ids_.size()]);
    }
    grpc::ClientContext context;
    daemon_.Authorize(context);
    v1::GetGangResponse response;
    grpc::Status status = Stub(client).GetGang(&context, request, &response);
    if (!status.ok()) return absl::UnavailableError(status.error_message());
    return absl::OkStatus();
  }

  // Makes later request ids distinct from earlier ones.
  void NextRound() { ++round_; }
  int round() const { return round_.load(); }
  int64_t submitted() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(ids_.size());
  }
  // The serialized size of a sampled pending gang (0 before one).
  int gang_bytes() const {
    absl::MutexLock lock(&mu_);
    return gang_bytes_;
  }
  // A serialized SubmitGangResponse of a gang left pending, one of the
  // sampled calls (the first pending one, then every kSampleEvery-th of each
  // client) — "" before one.
  std::string last_pending_response() const {
    absl::MutexLock lock(&mu_);
    return last_pending_response_;
  }

 private:
  static constexpr int64_t kSampleEvery = 256;

  v1::Scheduler::Stub& Stub(int client) {
    return *stubs_[client % stubs_.size()];
  }

  const PhalanxdProcess& daemon_;
  std::vector<std::unique_ptr<v1::Scheduler::Stub>> stubs_;
  std::atomic<int> round_{0};
  std::atomic<bool> have_sample_{false};
  mutable absl::Mutex mu_;
  std::vector<std::string> ids_ ABSL_GUARDED_BY(mu_);
  int gang_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_pending_response_ ABSL_GUARDED_BY(mu_);
};

// Clients of the empty-RPC baseline: the same requests over as many
// connections, answered without work.
class EmptyRpcClients {
 public:
  explicit EmptyRpcClients(const PhalanxdProcess& server) : server_(server) {
    for (int c = 0; c < kChannels; ++c) {
      stubs_.push_back(bench::v1::Baseline::NewStub(server.NewChannel(c)));
    }
  }

  absl::Status Call(int round, int client, int64_t index) {
    const v1::SubmitGangRequest request = SubmitRequest(round, client, index);
    grpc::ClientContext context;
    server_.Authorize(context);
    v1::SubmitGangResponse response;
    grpc::Status status =
        stubs_[client % stubs_.size()]->Empty(&context, request, &response);
    if (!status.ok()) return absl::UnavailableError(status.error_message());
    return absl::OkStatus();
  }

 private:
  const PhalanxdProcess& server_;
  std::vector<std::unique_ptr<bench::v1::Baseline::Stub>> stubs_;
};

std::vector<int> ParseClients() {
  std::vector<int> clients;
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_clients), ',')) {
    int n = 0;
    if (absl::SimpleAtoi(part, &n) && n > 0) clients.push_back(n);
  }
  return clients;
}

std::vector<double> ParseWatchRates() {
  std::vector<double> rates;
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_watch_rates), ',')) {
    double rate = 0;
    if (absl::SimpleAtod(part, &rate) && rate > 0) rates.push_back(rate);
  }
  return rates;
}

// The CPU set named by `flag` ("0,1"); empty when the flag is "".
absl::StatusOr<cpu_set_t> CpuSetOf(const std::string& flag) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (absl::string_view part : absl::StrSplit(flag, ',', absl::SkipEmpty())) {
    int cpu = 0;
    if (!absl::SimpleAtoi(part, &cpu) || cpu < 0 || cpu >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(
          absl::StrCat("cpus: not a CPU number: ", part));
    }
    CPU_SET(cpu, &set);
  }
  return set;
}

// Pins every thread of process `pid` (0: this process) to the CPUs of
// `flag`; threads it starts later inherit the set. Nothing when "".
absl::Status Pin(pid_t pid, const std::string& flag) {
  if (flag.empty()) return absl::OkStatus();
  absl::StatusOr<cpu_set_t> set = CpuSetOf(flag);
  if (!set.ok()) return set.status();
  const std::string tasks =
      absl::StrCat("/proc/", pid == 0 ? getpid() : pid, "/task");
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) return absl::InternalError("cannot read " + tasks);
  absl::Status status;
  while (dirent* entry = readdir(dir)) {
    int tid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &tid)) continue;
    if (sched_setaffinity(tid, sizeof(*set), &*set) != 0) {
      status = absl::InternalError(absl::StrCat("sched_setaffinity ", tid));
    }
  }
  closedir(dir);
  return status;
}

// Every gang is one node of 8 GPUs and the fleet is full after the warm-up,
// so all but the first kDaemonNodes submitted gangs are pending.
double PendingGangs(const LoadClients& clients) {
  return static_cast<double>(
      std::max<int64_t>(0, clients.submitted() - kDaemonNodes));
}

// CPU seconds used by the daemon, this process and the whole machine over
// one or more measured phases: on a small machine the ratio of durable to
// raw writes is bounded by the CPU an RPC costs, and this shows it.
class CpuTally {
 public:
  void Start(const PhalanxdProcess& daemon) {
    daemon_ -= CpuSecondsOf(daemon.pid());
    self_ -= CpuSecondsOf(getpid());
    wall_ -= NowSeconds();
  }
  void Stop(const PhalanxdProcess& daemon) {
    daemon_ += CpuSecondsOf(daemon.pid());
    self_ += CpuSecondsOf(getpid());
    wall_ += NowSeconds();
  }
  bench::JsonObject ToJson(int64_t ops) const {
    const double per_op = ops > 0 ? 1e6 / static_cast<double>(ops) : 0.0;
    bench::JsonObject json;
    json.Add("daemon_cores", wall_ > 0 ? daemon_ / wall_ : 0.0)
        .Add("load_generator_cores", wall_ > 0 ? self_ / wall_ : 0.0)
        .Add("daemon_cpu_us_per_op", daemon_ * per_op)
        .Add("load_generator_cpu_us_per_op", self_ * per_op);
    return json;
  }

 private:
  static double NowSeconds() {
    return std::chrono::duration<double>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  double daemon_ = 0;
  double self_ = 0;
  double wall_ = 0;
};

// The empty-RPC baseline: its server process and its clients.
struct EmptyRpc {
  PhalanxdProcess* server;
  EmptyRpcClients* clients;
};

double Ratio(double numerator, double denominator) {
  return denominator > 0 ? numerator / denominator : 0.0;
}

// Durable submits vs raw RocksDB and vs the empty RPC at each concurrency,
// alternated in `rounds` rounds so all three see the same disk and machine
// load. `ratio` is against the lower of the two limits.
bench::JsonObject SubmitVersusLimits(const PhalanxdProcess& daemon,
                                     LoadClients& clients, RawRocksDb& raw,
                                     const EmptyRpc& empty, double seconds,
                                     int rounds) {
  bench::JsonObject by_clients;
  for (int n : ParseClients()) {
    const int value_bytes = std::max(clients.gang_bytes(), 1);
    Log(absl::StrFormat(
        "%d clients: raw RocksDB (%d-byte values), empty RPC and durable "
        "SubmitGang, %d rounds",
        n, value_bytes, rounds));
    ClosedLoopResult raw_result, empty_result, submit;
    CpuTally raw_cpu, empty_cpu, submit_cpu;
    for (int round = 0; round < rounds; ++round) {
      raw_cpu.Start(daemon);
      raw_result.Merge(raw.Run(n, seconds / rounds, value_bytes));
      raw_cpu.Stop(daemon);
      clients.NextRound();
      const int empty_round = clients.round();
      empty_cpu.Start(*empty.server);
      empty_result.Merge(
          RunClosedLoop(n, seconds / rounds, 10'000'000, [&](int c, int64_t i) {
            return empty.clients->Call(empty_round, c, i);
          }));
      empty_cpu.Stop(*empty.server);
      submit_cpu.Start(daemon);
      submit.Merge(RunClosedLoop(
          n, seconds / rounds, 10'000'000,
          [&](int c, int64_t i) { return clients.Submit(c, i); }));
      submit_cpu.Stop(daemon);
    }
    bench::JsonObject raw_json = raw_result.ToJson();
    raw_json.Add("cpu", raw_cpu.ToJson(raw_result.ops));
    bench::JsonObject empty_json = empty_result.ToJson();
    empty_json.Add("cpu", empty_cpu.ToJson(empty_result.ops));
    bench::JsonObject submit_json = submit.ToJson();
    submit_json.Add("cpu", submit_cpu.ToJson(submit.ops));
    const double limit =
        std::min(raw_result.ops_per_sec, empty_result.ops_per_sec);
    bench::JsonObject entry;
    entry.Add("value_bytes", value_bytes)
        .Add("rounds", rounds)
        .Add("durable_submit", submit_json)
        .Add("raw_rocksdb_sync", raw_json)
        .Add("empty_rpc", empty_json)
        .Add("ratio_vs_raw", Ratio(submit.ops_per_sec, raw_result.ops_per_sec))
        .Add("ratio_vs_empty_rpc",
             Ratio(submit.ops_per_sec, empty_result.ops_per_sec))
        .Add("limit", raw_result.ops_per_sec <= empty_result.ops_per_sec
                          ? "raw_rocksdb_sync"
                          : "empty_rpc")
        .Add("ratio", Ratio(submit.ops_per_sec, limit));
    by_clients.Add(absl::StrCat(n), entry);
  }
  return by_clients;
}

bench::JsonObject Reads(LoadClients& clients, double seconds) {
  bench::JsonObject by_clients;
  for (int n : ParseClients()) {
    Log(absl::StrFormat("GetGang, %d clients", n));
    by_clients.Add(absl::StrCat(n),
                   RunClosedLoop(n, seconds, 10'000'000, [&](int c, int64_t i) {
                     return clients.Get(c, i);
                   }).ToJson());
  }
  return by_clients;
}

// Submits at 64 clients until the daemon holds `target` pending gangs (at
// most 120 s); returns the resident memory figure.
bench::JsonObject MemoryPerPendingGang(const PhalanxdProcess& daemon,
                                       LoadClients& clients, int64_t rss_before,
                                       double pending_before, int target) {
  const double missing = target - PendingGangs(clients);
  if (missing > 0) {
    Log(absl::StrFormat("topping up to %d pending gangs", target));
    clients.NextRound();
    RunClosedLoop(64, 120, static_cast<int64_t>(missing) / 64 + 1,
                  [&](int c, int64_t i) { return clients.Submit(c, i); });
  }
  const int64_t rss_after = daemon.RssBytes();
  const double pending_after = PendingGangs(clients);
  bench::JsonObject json;
  json.Add("rss_bytes_before", rss_before)
      .Add("rss_bytes_after", rss_after)
      .Add("pending_before", pending_before)
      .Add("pending_after", pending_after)
      .Add("bytes_per_pending_gang",
           pending_after > pending_before
               ? (rss_after - rss_before) / (pending_after - pending_before)
               : 0.0);
  return json;
}

bench::JsonObject Batching(const PhalanxdProcess& daemon) {
  const double batches = daemon.Metric("phalanx_storage_batch_commands_count");
  const double commands = daemon.Metric("phalanx_storage_batch_commands_sum");
  const double commits = daemon.Metric("phalanx_storage_commit_seconds_count");
  const double commit_s = daemon.Metric("phalanx_storage_commit_seconds_sum");
  const double cycles = daemon.Metric("phalanx_cycle_seconds_count");
  const double cycle_s = daemon.Metric("phalanx_cycle_seconds_sum");
  bench::JsonObject json;
  json.Add("batches", batches)
      .Add("commands_per_batch", batches > 0 ? commands / batches : 0.0)
      .Add("commit_ms_mean", commits > 0 ? 1e3 * commit_s / commits : 0.0)
      .Add("cycle_ms_mean", cycles > 0 ? 1e3 * cycle_s / cycles : 0.0);
  return json;
}

// One watch fan-out run per --watch_rates rate into `json`: "watch" keeps
// the first (the headline, 50/s), "watch_by_rate" all of them.
void WatchRuns(const PhalanxdProcess& daemon, LoadClients& clients,
               double seconds, bench::JsonObject& json) {
  bench::JsonObject by_rate;
  bool first = true;
  for (double rate : ParseWatchRates()) {
    Log(absl::StrFormat("watch fan-out, %d watchers, %g events/s",
                        absl::GetFlag(FLAGS_watchers), rate));
    WatchFanoutOptions watch;
    watch.watchers = absl::GetFlag(FLAGS_watchers);
    watch.events_per_sec = rate;
    watch.seconds = seconds;
    clients.NextRound();
    CpuTally cpu;
    cpu.Start(daemon);
    const WatchFanoutResult result = RunWatchFanout(
        daemon, watch, [&](int64_t i) { return clients.Submit(0, i); });
    cpu.Stop(daemon);
    // Per delivery: the load generator's 1,000 reactors share the machine.
    bench::JsonObject entry = result.ToJson();
    entry.Add("events_per_sec_asked", rate)
        .Add("cpu_per_delivery", cpu.ToJson(result.deliveries));
    if (first) json.Add("watch", entry);
    first = false;
    by_rate.Add(absl::StrFormat("%g", rate), entry);
  }
  json.Add("watch_by_rate", by_rate);
}

absl::StatusOr<bench::JsonObject> DaemonPhases(const std::string& root,
                                               bool quick) {
  const double seconds = SecondsFlag(quick);
  const std::string dir = root + "/daemon";
  std::filesystem::create_directories(dir);
  auto files = WriteDaemonFiles(dir, kDaemonNodes);
  if (!files.ok()) return files.status();
  std::vector<std::string> args = files->Args();
  std::vector<std::string> auth_args;
  BenchAuth auth;
  if (absl::GetFlag(FLAGS_auth)) {
    auto written = WriteBenchAuth(dir);
    if (!written.ok()) return written.status();
    auth = *std::move(written);
    auth_args.push_back("--auth=" + auth.path);
    args.push_back("--auth=" + auth.path);
  }
  PhalanxdProcess daemon(absl::GetFlag(FLAGS_phalanxd), dir + "/data", args);
  daemon.set_token(auth.token);
  if (!daemon.Start()) {
    return absl::InternalError("phalanxd did not start: " + daemon.output());
  }
  if (auto s = Pin(daemon.pid(), absl::GetFlag(FLAGS_server_cpus)); !s.ok()) {
    return s;
  }
  LoadClients clients(daemon);
  Log(absl::StrFormat("warm-up: filling the fleet (auth %s)",
                      auth.token.empty() ? "off" : "on: tenant token"));
  RunClosedLoop(64, 1.0, 50,
                [&](int c, int64_t i) { return clients.Submit(c, i); });
  if (const int prefill = absl::GetFlag(FLAGS_prefill); prefill > 0) {
    Log(absl::StrFormat("prefill: %d pending gangs", prefill));
    clients.NextRound();
    RunClosedLoop(64, 300, prefill / 64 + 1,
                  [&](int c, int64_t i) { return clients.Submit(c, i); });
  }
  if (absl::GetFlag(FLAGS_watch_only)) {
    bench::JsonObject json;
    WatchRuns(daemon, clients, seconds, json);
    json.Add("daemon_exit_code", daemon.Terminate());
    return json;
  }
  const int64_t rss_before = daemon.RssBytes();
  const double pending_before = PendingGangs(clients);
  auto raw = RawRocksDb::Open(root + "/raw");
  if (!raw.ok()) return raw.status();
  // The empty-RPC baseline answers with a pending gang's SubmitGangResponse
  // as the daemon sent it, so both carry the same bytes.
  const std::string response_path = dir + "/empty-rpc-response.bin";
  std::ofstream(response_path, std::ios::binary)
      << clients.last_pending_response();
  auth_args.push_back("--response=" + response_path);
  PhalanxdProcess empty_server(absl::GetFlag(FLAGS_empty_rpc), dir + "/empty",
                               auth_args);
  empty_server.set_token(auth.token);
  empty_server.set_ready_probe(
      [&](const std::shared_ptr<grpc::Channel>& channel) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::seconds(1));
        empty_server.Authorize(context);
        v1::SubmitGangResponse response;
        return bench::v1::Baseline::NewStub(channel)
            ->Empty(&context, SubmitRequest(0, 0, 0), &response)
            .ok();
      });
  if (!empty_server.Start()) {
    return absl::InternalError("phalanx-empty-rpc did not start: " +
                               empty_server.output());
  }
  if (auto s = Pin(empty_server.pid(), absl::GetFlag(FLAGS_server_cpus));
      !s.ok()) {
    return s;
  }
  EmptyRpcClients empty_clients(empty_server);
  bench::JsonObject json;
  json.Add("auth", !auth.token.empty());
  json.Add("submit",
           SubmitVersusLimits(daemon, clients, **raw,
                              {&empty_server, &empty_clients}, seconds,
                              /*rounds=*/2));
  json.Add("empty_rpc_exit_code", empty_server.Terminate());
  json.Add("batching_during_submits", Batching(daemon));
  json.Add("server_cpus", absl::GetFlag(FLAGS_server_cpus))
      .Add("client_cpus", absl::GetFlag(FLAGS_client_cpus));
  if (absl::GetFlag(FLAGS_submit_only)) {
    json.Add("daemon_exit_code", daemon.Terminate());
    return json;
  }
  json.Add("memory",
           MemoryPerPendingGang(daemon, clients, rss_before, pending_before,
                                ByMode(absl::GetFlag(FLAGS_pending_target),
                                       quick, 20'000, 100'000)));
  json.Add("get", Reads(clients, seconds));
  WatchRuns(daemon, clients, seconds, json);
  json.Add("daemon_exit_code", daemon.Terminate());
  return json;
}

// Writes the JSON to --out (default: stdout); false when it cannot.
bool WriteOut(const bench::JsonObject& out) {
  const std::string path = absl::GetFlag(FLAGS_out);
  if (path.empty()) {
    std::printf("%s\n", out.Dump().c_str());
    return true;
  }
  std::ofstream file(path);
  file << out.Dump() << "\n";
  return static_cast<bool>(file);
}

int Main(bool quick) {
  std::string pattern = absl::GetFlag(FLAGS_tmp) + "/phalanx-load-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    Log("cannot create a temporary directory");
    return 1;
  }
  const std::string root = pattern;
  bench::JsonObject out;
  int code = 0;
  if (auto s = Pin(0, absl::GetFlag(FLAGS_client_cpus)); !s.ok()) {
    Log(s.ToString());
    return 1;
  }
  auto daemon = DaemonPhases(root, quick);
  if (daemon.ok()) {
    out.Add("daemon", *daemon);
  } else {
    Log(daemon.status().ToString());
    code = 1;
  }
  if (absl::GetFlag(FLAGS_submit_only) || absl::GetFlag(FLAGS_watch_only)) {
    std::filesystem::remove_all(root);
    return WriteOut(out) ? code : 1;
  }
  RestartOptions restart;
  restart.phalanxd = absl::GetFlag(FLAGS_phalanxd);
  restart.dir = root + "/restart";
  restart.gangs = absl::GetFlag(FLAGS_restart_gangs);
  restart.runs = ByMode(absl::GetFlag(FLAGS_restart_runs), quick, 1, 3);
  std::filesystem::create_directories(restart.dir);
  Log(absl::StrFormat("restart with %d active gangs", restart.gangs));
  auto restarted = RunRestart(restart);
  if (restarted.ok()) {
    out.Add("restart", restarted->ToJson());
  } else {
    Log(restarted.status().ToString());
    code = 1;
  }
  std::filesystem::remove_all(root);
  return WriteOut(out) ? code : 1;
}

}  // namespace
}  // namespace phalanx::perf

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "phalanx-load [--quick] [--clients 1,8,64] [--out FILE]");
  absl::ParseCommandLine(argc, argv);
  return phalanx::perf::Main(absl::GetFlag(FLAGS_quick));
}
