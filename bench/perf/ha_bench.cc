// phalanx-ha-bench: the HA mode's figures in one run (docs/ha.md). Starts a
// real 3-member etcd cluster on loopback (tests/etcd_cluster.h) and three
// real phalanxd replicas in HA mode against it, then measures:
//   submit: durable SubmitGang/s through the leader at each concurrency,
//           and, alternated with it, raw fenced etcd transactions (compare
//           a leader key's create revision, put one value the size of a
//           one-submit log entry) at the same concurrency;
//   kill:   SIGKILL of the leader -> a standby reports phalanx.v1.Leader
//           SERVING, and -> it accepts a submit; the killed replica is
//           restarted as a standby for the next round;
//   pause:  SIGSTOP of the leader past its lease TTL -> the same; then
//           SIGCONT, and how long the old leader took to exit.
// With --auth (the default) the replicas run with --auth (bench_auth.h: one
// tenant principal, rate limit raised) and every submit sends its bearer
// token, as launchers run it. The raw etcd side has no token of its own: the
// test cluster runs without etcd auth, for the replicas' etcd client and the
// raw client alike.
// Writes one JSON object (--out_json) and a markdown summary (--out_md).
// Every wait is bounded; only processes it started are signalled.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "bench/json.h"
#include "bench/perf/bench_auth.h"
#include "bench/perf/closed_loop.h"
#include "bench/perf/daemon_files.h"
#include "bench/perf/workload.h"
#include "bench/stats.h"
#include "grpcpp/generic/generic_stub.h"
#include "phalanx/v1/scheduler.grpc.pb.h"
#include "storage/etcd/etcd_client.h"
#include "tests/child_process.h"
#include "tests/etcd_cluster.h"
#include "tests/health_probe.h"

ABSL_FLAG(std::string, phalanxd, PHALANXD_PATH, "phalanxd binary");
ABSL_FLAG(std::string, clients, "1,8,64", "Concurrencies of the submit test");
ABSL_FLAG(double, seconds, 3, "Seconds per measured submit phase");
ABSL_FLAG(int, failovers, 3, "Repetitions of each failover (kill, pause)");
ABSL_FLAG(int, lease_ttl_seconds, 2, "The replicas' --etcd-lease-ttl");
ABSL_FLAG(bool, auth, true,
          "Run the replicas with --auth: every submit sends a tenant's bearer "
          "token");
ABSL_FLAG(double, start_timeout_seconds, 60,
          "Bound on each replica's start (to lead, or to stand by caught up)");
ABSL_FLAG(std::string, out_json, "", "Write the JSON here");
ABSL_FLAG(std::string, out_md, "", "Write the markdown summary here");

namespace phalanx::perf {
namespace {

namespace etcd = ::phalanx::storage::etcd;
namespace epb = ::etcdserverpb;
constexpr char kPrefix[] = "/phalanx/habench";

void Log(const std::string& message) {
  std::fprintf(stderr, "phalanx-ha-bench: %s\n", message.c_str());
}

double SecondsSince(absl::Time start) {
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// A free loopback TCP port (bound, read back, released).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// grpc.health.v1.Health/Check of `service` on a fresh channel (no
// reconnect backoff carried between probes): 1 = SERVING, 2 = NOT_SERVING,
// -code on an RPC error.
int Health(const std::string& address, const std::string& service,
           absl::Duration timeout) {
  return ::phalanx::testing::HealthStatus(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()), service,
      timeout);
}

// One phalanxd replica: fixed loopback ports, its output in a log file.
class Replica {
 public:
  Replica(std::string id, std::string dir, std::vector<std::string> args)
      : id_(std::move(id)), dir_(std::move(dir)), args_(std::move(args)) {
    port_ = FreePort();
    metrics_port_ = FreePort();
    std::filesystem::create_directories(dir_);
  }
  bool Spawn() {
    std::vector<std::string> args = {
        absl::GetFlag(FLAGS_phalanxd),
        absl::StrCat("--listen=", address()),
        absl::StrCat("--advertise-address=", address()),
        absl::StrCat("--metrics-listen=127.0.0.1:", metrics_port_),
        absl::StrCat("--data-dir=", dir_, "/data"),
        absl::StrCat("--replica-id=", id_)};
    args.insert(args.end(), args_.begin(), args_.end());
    return process_.Start({.args = args,
                           .env = {},
                           .output_path = log_path(),
                           .append_output = true});
  }
  void Signal(int signal) { process_.Signal(signal); }
  // SIGKILL and reap (also when paused).
  void Kill() { process_.Kill9(); }
  // Waits at most `timeout` for the process to exit; its code (128 + the
  // signal when one ended it), or -1.
  int WaitExit(absl::Duration timeout) {
    if (!process_.Running()) return -1;
    process_.WaitUntil([] { return false; }, timeout);
    return process_.Running() ? -1 : process_.shell_status();
  }
  // Reaps the process if it has exited (no wait); true when it has.
  bool Exited() { return !process_.Running(); }
  bool running() const { return process_.pid() > 0; }
  std::string Output() const { return process_.Output(); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  std::string log_path() const { return dir_ + "/phalanxd.log"; }
  const std::string& id() const { return id_; }

 private:
  std::string id_;
  std::string dir_;
  std::vector<std::string> args_;
  int port_ = 0;
  int metrics_port_ = 0;
  ::phalanx::testing::ChildProcess process_;  // SIGKILLed when destroyed
};

// The replica (index) that reports phalanx.v1.Leader SERVING, polling every
// replica in `candidates` every few ms for at most `timeout`; -1 if none.
int AwaitLeader(const std::vector<std::unique_ptr<Replica>>& replicas,
                const std::vector<int>& candidates, absl::Duration timeout) {
  const absl::Time start = absl::Now();
  while (absl::Now() - start < timeout) {
    for (int i : candidates) {
      if (replicas[i]->running() &&
          Health(replicas[i]->address(), "phalanx.v1.Leader",
                 absl::Milliseconds(200)) == 1) {
        return i;
      }
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return -1;
}

v1::SubmitGangRequest SubmitRequest(const std::string& request_id, int client) {
  v1::SubmitGangRequest request;
  v1::GangSpec* spec = request.mutable_spec();
  spec->set_queue(absl::StrFormat("team-%d", client % kTeams));
  spec->set_request_id(request_id);
  v1::PodSet* set = spec->add_pod_sets();
  set->set_name("workers");
  set->set_count(1);
  set->set_gpus(kGpusPerNode);
  return request;
}

// The `authorization` metadata of every submit ("" = none: no --auth).
std::string& Authorization() {
  static std::string* authorization = new std::string;
  return *authorization;
}

void Authorize(grpc::ClientContext& context) {
  if (!Authorization().empty()) {
    context.AddMetadata("authorization", Authorization());
  }
}

// Submits until one is accepted (at most `timeout`); true when one was.
bool SubmitOnce(const std::string& address, const std::string& request_id,
                absl::Duration timeout) {
  auto stub = v1::Scheduler::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  const absl::Time start = absl::Now();
  while (absl::Now() - start < timeout) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    Authorize(context);
    v1::SubmitGangResponse response;
    if (stub->SubmitGang(&context, SubmitRequest(request_id, 0), &response)
            .ok()) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

// Waits (bounded) until replica `r` stands by ready to take over: its ""
// health service SERVING (it serves gRPC and has caught up with the log) and
// phalanx.v1.Leader NOT_SERVING (it follows). Health, not a line of its
// output: the daemon's wording changes ("standby:" became "following:").
// False when it exits or `timeout` passes.
bool AwaitStandby(Replica& r, absl::Duration timeout) {
  const absl::Time start = absl::Now();
  while (absl::Now() - start < timeout) {
    if (r.Exited()) return false;
    if (Health(r.address(), "", absl::Milliseconds(500)) == 1 &&
        Health(r.address(), "phalanx.v1.Leader", absl::Milliseconds(500)) ==
            2) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

bench::JsonObject MinMedianMax(std::vector<double> samples) {
  bench::JsonObject json;
  if (samples.empty()) return json;
  std::sort(samples.begin(), samples.end());
  json.Add("n", static_cast<int>(samples.size()))
      .Add("min", samples.front())
      .Add("median", bench::Percentile(samples, 50))
      .Add("max", samples.back());
  return json;
}

std::string Mmm(std::vector<double> samples) {
  if (samples.empty()) return "not measured";
  std::sort(samples.begin(), samples.end());
  return absl::StrFormat("%.2f / %.2f / %.2f", samples.front(),
                         bench::Percentile(samples, 50), samples.back());
}

// The mean size of the newest 64 log entries (batches) in bytes; 0 when
// none.
int NewestEntryBytes(etcd::EtcdClient& client) {
  const std::string prefix = std::string(kPrefix) + "/log/";
  epb::RangeRequest range;
  range.set_key(prefix);
  range.set_range_end(etcd::PrefixEnd(prefix));
  range.set_sort_order(epb::RangeRequest::DESCEND);
  range.set_sort_target(epb::RangeRequest::KEY);
  range.set_limit(64);
  auto response = client.Range(range);
  if (!response.ok() || response->kvs_size() == 0) return 0;
  size_t bytes = 0;
  for (const auto& kv : response->kvs()) bytes += kv.value().size();
  return static_cast<int>(bytes / response->kvs_size());
}

absl::Duration StartTimeout() {
  return absl::Seconds(absl::GetFlag(FLAGS_start_timeout_seconds));
}

struct Failover {
  std::vector<double> to_leader_s;  // -> phalanx.v1.Leader SERVING
  std::vector<double> to_submit_s;  // -> a submit accepted
  std::vector<double> old_exit_s;   // pause only: SIGCONT -> old leader exits
  std::vector<int> old_exit_codes;
  int failed = 0;
};

// One failover round: `how` is SIGKILL or SIGSTOP of the current leader.
// Returns the new leader's index, or -1.
int FailoverOnce(std::vector<std::unique_ptr<Replica>>& replicas, int leader,
                 int how, int round, Failover& out) {
  std::vector<int> others;
  for (int i = 0; i < static_cast<int>(replicas.size()); ++i) {
    if (i != leader) others.push_back(i);
  }
  const absl::Time t0 = absl::Now();
  replicas[leader]->Signal(how);
  if (how == SIGKILL) replicas[leader]->Kill();
  const int next = AwaitLeader(replicas, others, absl::Seconds(30));
  if (next < 0) {
    ++out.failed;
    return -1;
  }
  out.to_leader_s.push_back(SecondsSince(t0));
  if (!SubmitOnce(replicas[next]->address(),
                  absl::StrCat("failover-", how, "-", round),
                  absl::Seconds(30))) {
    ++out.failed;
    return -1;
  }
  out.to_submit_s.push_back(SecondsSince(t0));
  if (how == SIGSTOP) {
    const absl::Time resumed = absl::Now();
    replicas[leader]->Signal(SIGCONT);
    const int code = replicas[leader]->WaitExit(absl::Seconds(30));
    out.old_exit_codes.push_back(code);
    if (code >= 0) out.old_exit_s.push_back(SecondsSince(resumed));
    replicas[leader]->Kill();  // if it did not exit
  }
  // Back as a standby for the next round.
  if (!replicas[leader]->Spawn() ||
      !AwaitStandby(*replicas[leader], StartTimeout())) {
    Log("the old leader did not come back as a standby:\n" +
        replicas[leader]->Output());
  }
  return next;
}

int Main() {
  const absl::Time begin = absl::Now();
  if (!testing::EtcdCluster::Available()) {
    Log("/usr/bin/etcd is absent: install etcd-server");
    return 2;
  }
  testing::EtcdCluster cluster(3);
  if (!cluster.Start()) {
    Log("etcd did not start:\n" + cluster.logs());
    return 1;
  }
  etcd::EtcdClientOptions client_options;
  client_options.endpoints = cluster.endpoints();
  auto client = etcd::EtcdClient::Connect(client_options);
  if (!client.ok()) return 1;
  const std::string root = cluster.root();
  absl::StatusOr<DaemonFiles> files = WriteDaemonFiles(root, 64);
  if (!files.ok()) {
    Log(files.status().ToString());
    return 1;
  }
  const int ttl = absl::GetFlag(FLAGS_lease_ttl_seconds);
  std::vector<std::string> args = files->Args();
  if (absl::GetFlag(FLAGS_auth)) {
    absl::StatusOr<BenchAuth> auth = WriteBenchAuth(root);
    if (!auth.ok()) {
      Log(auth.status().ToString());
      return 1;
    }
    args.push_back("--auth=" + auth->path);
    Authorization() = "Bearer " + auth->token;
  }
  args.push_back("--etcd-endpoints=" + absl::StrJoin(cluster.endpoints(), ","));
  args.push_back(absl::StrCat("--etcd-prefix=", kPrefix));
  args.push_back(absl::StrCat("--etcd-lease-ttl=", ttl, "s"));
  std::vector<std::unique_ptr<Replica>> replicas;
  for (int i = 0; i < 3; ++i) {
    replicas.push_back(std::make_unique<Replica>(
        absl::StrCat("r", i), absl::StrCat(root, "/r", i), args));
  }
  // r0 first, so it leads; then the standbys.
  if (!replicas[0]->Spawn()) return 1;
  int leader = AwaitLeader(replicas, {0}, StartTimeout());
  if (leader < 0) {
    Log("r0 did not lead:\n" + replicas[0]->Output());
    return 1;
  }
  for (int i = 1; i < 3; ++i) {
    if (!replicas[i]->Spawn() || !AwaitStandby(*replicas[i], StartTimeout())) {
      Log("a standby did not start:\n" + replicas[i]->Output());
      return 1;
    }
  }
  Log(absl::StrFormat("3 replicas up after %.1f s; r0 leads; auth %s",
                      SecondsSince(begin),
                      Authorization().empty() ? "off" : "on: tenant token"));

  // 1. Durable submits vs raw fenced transactions of one entry's size.
  bench::JsonObject submit_json;
  std::vector<std::string> submit_rows;
  const double seconds = absl::GetFlag(FLAGS_seconds);
  epb::PutRequest raw_leader;
  raw_leader.set_key(std::string(kPrefix) + "-raw/leader");
  raw_leader.set_value("bench");
  const int64_t raw_term = (*client)->Put(raw_leader)->header().revision();
  int entry_bytes = 0;
  int round = 0;
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_clients), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n <= 0) continue;
    ++round;
    std::vector<std::unique_ptr<v1::Scheduler::Stub>> stubs;
    for (int c = 0; c < 8; ++c) {
      grpc::ChannelArguments channel_args;
      channel_args.SetInt("phalanx.shard", c);  // distinct connections
      stubs.push_back(v1::Scheduler::NewStub(grpc::CreateCustomChannel(
          replicas[leader]->address(), grpc::InsecureChannelCredentials(),
          channel_args)));
    }
    const ClosedLoopResult daemon = RunClosedLoop(
        n, seconds, 10'000'000, [&](int c, int64_t i) -> absl::Status {
          grpc::ClientContext context;
          context.set_deadline(
              absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
          Authorize(context);
          v1::SubmitGangResponse response;
          grpc::Status status = stubs[c % stubs.size()]->SubmitGang(
              &context,
              SubmitRequest(absl::StrFormat("load-%d-%d-%d", round, c, i), c),
              &response);
          if (!status.ok())
            return absl::UnavailableError(status.error_message());
          return absl::OkStatus();
        });
    if (entry_bytes == 0) entry_bytes = std::max(NewestEntryBytes(**client), 1);
    const std::string value(entry_bytes, 'x');
    const ClosedLoopResult raw = RunClosedLoop(
        n, seconds, 10'000'000, [&](int c, int64_t i) -> absl::Status {
          epb::TxnRequest txn;
          *txn.add_compare() = [&] {
            epb::Compare fence;
            fence.set_key(raw_leader.key());
            fence.set_target(epb::Compare::CREATE);
            fence.set_result(epb::Compare::EQUAL);
            fence.set_create_revision(raw_term);
            return fence;
          }();
          epb::PutRequest* put = txn.add_success()->mutable_request_put();
          put->set_key(
              absl::StrFormat("%s-raw/w/%d/%d/%d", kPrefix, round, c, i));
          put->set_value(value);
          absl::StatusOr<epb::TxnResponse> response = (*client)->Txn(txn);
          if (!response.ok()) return response.status();
          if (!response->succeeded()) return absl::AbortedError("fenced");
          return absl::OkStatus();
        });
    bench::JsonObject row;
    row.Add("ha_submit", daemon.ToJson())
        .Add("raw_etcd_txn", raw.ToJson())
        .Add("ratio",
             raw.ops_per_sec > 0 ? daemon.ops_per_sec / raw.ops_per_sec : 0.0);
    submit_json.Add(absl::StrCat(n), row);
    submit_rows.push_back(absl::StrFormat(
        "| %d | %.0f | %.1f / %.1f | %.0f | %.1f / %.1f | %.2f |", n,
        daemon.ops_per_sec, daemon.p50_ms, daemon.p99_ms, raw.ops_per_sec,
        raw.p50_ms, raw.p99_ms,
        raw.ops_per_sec > 0 ? daemon.ops_per_sec / raw.ops_per_sec : 0.0));
    Log(submit_rows.back());
    if (daemon.errors > 0) Log("submit errors: " + daemon.first_error);
    if (raw.errors > 0) Log("raw txn errors: " + raw.first_error);
  }

  // 2. Failovers.
  const int repetitions = absl::GetFlag(FLAGS_failovers);
  Failover killed, paused;
  for (int r = 0; r < repetitions && leader >= 0; ++r) {
    leader = FailoverOnce(replicas, leader, SIGKILL, r, killed);
    Log(absl::StrFormat("kill -9 round %d: new leader %d", r, leader));
  }
  for (int r = 0; r < repetitions && leader >= 0; ++r) {
    leader = FailoverOnce(replicas, leader, SIGSTOP, r, paused);
    Log(absl::StrFormat("SIGSTOP round %d: new leader %d", r, leader));
  }
  auto failover_json = [](const Failover& f) {
    bench::JsonObject json;
    json.Add("to_leader_serving_s", MinMedianMax(f.to_leader_s))
        .Add("to_submit_accepted_s", MinMedianMax(f.to_submit_s))
        .Add("failed_rounds", f.failed);
    if (!f.old_exit_codes.empty()) {
      json.Add("old_leader_exit_after_sigcont_s", MinMedianMax(f.old_exit_s))
          .Add("old_leader_exit_codes", absl::StrJoin(f.old_exit_codes, ","));
    }
    return json;
  };

  epb::StatusResponse status;
  if (auto s = (*client)->MemberStatus(); s.ok()) status = *s;
  bench::JsonObject json;
  json.Add("etcd_members", 3)
      .Add("auth", !Authorization().empty())
      .Add("lease_ttl_s", ttl)
      .Add("seconds_per_phase", seconds)
      .Add("log_entry_bytes", entry_bytes)
      .Add("submit_vs_raw_etcd", submit_json)
      .Add("failover_kill9", failover_json(killed))
      .Add("failover_sigstop", failover_json(paused))
      .Add("etcd_db_size_bytes", static_cast<int64_t>(status.dbsize()))
      .Add("total_seconds", SecondsSince(begin));

  std::string md = absl::StrFormat(
      "## HA mode (phalanx-ha-bench)\n\n"
      "3-member etcd on loopback, 3 phalanxd replicas, lease TTL %d s, "
      "%s; %.0f s per submit phase; raw Txn value %d bytes (the mean log "
      "entry of the 1-client phase; etcd itself runs without auth, for the "
      "replicas and the raw client alike).\n\n"
      "| clients | HA SubmitGang/s | p50 / p99 ms | raw etcd Txn/s | "
      "p50 / p99 ms | HA / raw |\n| --- | --- | --- | --- | --- | --- |\n%s\n\n"
      "| failover (%d rounds) | -> Leader SERVING, s (min / median / max) | "
      "-> submit accepted, s |\n| --- | --- | --- |\n"
      "| kill -9 of the leader | %s | %s |\n"
      "| SIGSTOP of the leader | %s | %s |\n\n"
      "After SIGCONT the paused leader exited in %s s (exit codes %s).\n",
      ttl,
      Authorization().empty() ? "auth off"
                              : "--auth on (every submit sends a tenant's "
                                "bearer token)",
      seconds, entry_bytes, absl::StrJoin(submit_rows, "\n"), repetitions,
      Mmm(killed.to_leader_s), Mmm(killed.to_submit_s), Mmm(paused.to_leader_s),
      Mmm(paused.to_submit_s), Mmm(paused.old_exit_s),
      absl::StrJoin(paused.old_exit_codes, ","));
  if (!absl::GetFlag(FLAGS_out_json).empty()) {
    std::ofstream(absl::GetFlag(FLAGS_out_json)) << json.Dump() << "\n";
  }
  if (!absl::GetFlag(FLAGS_out_md).empty()) {
    std::ofstream(absl::GetFlag(FLAGS_out_md)) << md;
  }
  std::printf("%s", md.c_str());
  return killed.failed + paused.failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace phalanx::perf

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return phalanx::perf::Main();
}
