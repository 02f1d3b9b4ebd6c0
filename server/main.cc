// phalanxd: the Phalanx gang-scheduling daemon. Recovers its state from
// RocksDB (or, with --etcd-endpoints, from the replicated log on etcd once
// this replica leads: docs/ha.md), applies the start-up files, serves
// gRPC (Scheduler, Fleet, Admin, health, reflection) and /metrics, and on
// SIGTERM or SIGINT ends watch streams, drains in-flight calls, closes the
// store and exits 0.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "phalanx_version.h"
#include "proto/auth_config.h"
#include "server/admin_service.h"
#include "server/audit_log.h"
#include "server/auth.h"
#include "server/fleet_service.h"
#include "server/follower.h"
#include "server/gate.h"
#include "server/ha_mode.h"
#include "server/metrics.h"
#include "server/scheduler_loop.h"
#include "server/scheduler_service.h"
#include "server/startup.h"
#include "server/tls.h"
#include "server/watch_hub.h"
#include "storage/rocksdb_store.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "gRPC address; port 0 picks a free port (printed at start)");
ABSL_FLAG(std::string, data_dir, "./var/phalanx", "RocksDB directory");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Prometheus /metrics address; port 0 picks a free port");
ABSL_FLAG(std::string, config, "",
          "Config file (proto3 JSON of phalanx.v1.Config)");
ABSL_FLAG(std::string, fleet, "",
          "Nodes to upsert at start (JSON of phalanx.v1.UpsertNodesRequest)");
ABSL_FLAG(std::string, queues, "",
          "Queues to put at start (JSON of phalanx.v1.ListQueuesResponse)");
ABSL_FLAG(int, max_message_bytes, 4 << 20,
          "Largest request accepted; larger ones get RESOURCE_EXHAUSTED");
ABSL_FLAG(bool, insecure, false,
          "Allow listening beyond loopback without TLS (gRPC) or at all "
          "(metrics, which has no TLS), or without --auth");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain to serve gRPC over TLS (with --tls-key); "
          "re-read when it changes");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM roots: require client certificates signed by them (mTLS)");
ABSL_FLAG(absl::Duration, tls_reload_interval, absl::Seconds(10),
          "How often the TLS files are checked for changes");
ABSL_FLAG(
    std::string, print_address_file, "",
    "Once serving, write the bound addresses here as JSON "
    "({\"grpc\": \"HOST:PORT\", \"metrics\": \"HOST:PORT\", \"pid\": N}), "
    "atomically (a temporary file renamed into place)");
ABSL_FLAG(std::string, auth, "",
          "Principals (proto3 JSON of phalanx.v1.AuthConfig); SIGHUP "
          "re-reads it. Without it every caller is an admin (loopback "
          "development mode)");

ABSL_FLAG(std::vector<std::string>, etcd_endpoints, {},
          "HA mode (docs/ha.md): etcd client URLs, comma-separated "
          "(http://HOST:PORT or https://HOST:PORT)");
ABSL_FLAG(std::string, replica_id, "", "HA mode: this replica's name");
ABSL_FLAG(std::string, advertise_address, "",
          "HA mode: the gRPC address other replicas and clients reach this "
          "one at (default: --listen)");
ABSL_FLAG(std::string, etcd_prefix, "/phalanx/default",
          "HA mode: the etcd key prefix of this Phalanx cluster");
ABSL_FLAG(absl::Duration, etcd_lease_ttl, absl::Seconds(5),
          "HA mode: the leader's lease; a dead leader is replaced after it");
ABSL_FLAG(int64_t, etcd_snapshot_entries, 10000,
          "HA mode: the leader snapshots its state into etcd (and compacts "
          "the log) after this many log entries");
ABSL_FLAG(int64_t, etcd_snapshot_mib, 64,
          "HA mode: ... or after this many MiB of log, whichever comes first");
ABSL_FLAG(int64_t, etcd_max_batch_bytes,
          static_cast<int64_t>(phalanx::storage::etcd::kDefaultMaxBatchBytes),
          "HA mode: the largest log entry; a larger batch is split into "
          "several entries (parts). Keep it under etcd's --max-request-bytes "
          "less 64 KiB; smaller values are a testing knob");
ABSL_FLAG(absl::Duration, watch_sweep_interval, absl::Milliseconds(25),
          "while events keep coming, watch streams get new events at most "
          "this often, in one message (0s..10s; docs/watch.md)");
ABSL_FLAG(absl::Duration, watch_sweep_quiet, absl::Milliseconds(15),
          "an event committed this long after the last watch sweep goes out "
          "at once (0s..10s)");
ABSL_FLAG(std::string, etcd_user, "", "HA mode: etcd user");
ABSL_FLAG(std::string, etcd_password_file, "",
          "HA mode: file holding the etcd user's password");
ABSL_FLAG(std::string, etcd_ca, "",
          "HA mode: PEM roots of etcd's certificate (turns on TLS)");
ABSL_FLAG(std::string, etcd_cert, "",
          "HA mode: PEM client certificate for etcd (mTLS)");
ABSL_FLAG(std::string, etcd_key, "", "HA mode: the key of --etcd-cert");

namespace phalanx::server {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "phalanxd: %s\n", message.c_str());
  return 1;
}

bool IsLoopback(const std::string& address) {
  return absl::StartsWith(address, "127.") ||
         absl::StartsWith(address, "localhost:") ||
         absl::StartsWith(address, "[::1]:");
}

// Blocks SIGTERM, SIGINT and SIGHUP in every thread (call before starting
// any), so WaitForStop can take them.
sigset_t BlockSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// Beyond loopback, gRPC needs TLS and --auth (or --insecure), and metrics
// (plain HTTP) need --insecure.
absl::Status CheckListenAddresses(bool tls, bool auth) {
  const bool insecure = absl::GetFlag(FLAGS_insecure);
  const std::string listen = absl::GetFlag(FLAGS_listen);
  if (!IsLoopback(listen) && !insecure && !(tls && auth)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--listen ", listen,
                     " is not loopback: serve it with --tls-cert, "
                     "--tls-key and --auth, or pass --insecure"));
  }
  const std::string metrics = absl::GetFlag(FLAGS_metrics_listen);
  if (!IsLoopback(metrics) && !insecure) {
    return absl::FailedPreconditionError(
        absl::StrCat("--metrics-listen ", metrics,
                     " is not loopback and /metrics has no "
                     "TLS: put it behind a proxy, or pass --insecure"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<auth::AuthPolicy> ReadAuthFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<auth::AuthPolicy> policy = auth::ParseAuthConfigJson(*text);
  if (!policy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth ", path, ": ", policy.status().message()));
  }
  return policy;
}

absl::StatusOr<std::unique_ptr<Authenticator>> MakeAuthenticator() {
  const std::string path = absl::GetFlag(FLAGS_auth);
  if (path.empty()) {
    std::fprintf(stderr,
                 "phalanxd: WARNING: no --auth: every caller is an ADMIN. "
                 "This is development mode; give --auth FILE before anyone "
                 "else can reach this daemon.\n");
    return std::make_unique<Authenticator>();
  }
  absl::StatusOr<auth::AuthPolicy> policy = ReadAuthFile(path);
  if (!policy.ok()) return policy.status();
  std::printf("phalanxd: %zu principals from %s\n", policy->principals.size(),
              path.c_str());
  return std::make_unique<Authenticator>(*std::move(policy));
}

TlsFiles TlsFlags() {
  return {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
          absl::GetFlag(FLAGS_tls_client_ca),
          absl::GetFlag(FLAGS_tls_reload_interval)};
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials() {
  const TlsFiles files = TlsFlags();
  if (files.cert.empty() && files.key.empty()) {
    if (!files.client_ca.empty()) {
      return absl::InvalidArgumentError(
          "--tls-client-ca needs --tls-cert and --tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  return TlsCredentials(files);
}

void RefreshCertificateExpiry(Metrics& metrics) {
  const std::string cert = absl::GetFlag(FLAGS_tls_cert);
  if (cert.empty()) return;
  if (auto not_after = CertificateNotAfter(cert); not_after.ok()) {
    metrics.SetCertificateExpiry(*not_after);
  }
}

// SIGHUP: the principals again from --auth; a file that does not parse
// keeps the old ones.
void ReloadAuth(Authenticator& authenticator) {
  const std::string path = absl::GetFlag(FLAGS_auth);
  if (!authenticator.enabled()) {
    std::printf("phalanxd: SIGHUP: no --auth to reload\n");
    return;
  }
  absl::StatusOr<auth::AuthPolicy> policy = ReadAuthFile(path);
  if (!policy.ok()) {
    std::printf("phalanxd: SIGHUP: keeping the old principals: %s\n",
                std::string(policy.status().message()).c_str());
    return;
  }
  const size_t count = policy->principals.size();
  authenticator.Replace(*std::move(policy));
  std::printf("phalanxd: SIGHUP: %zu principals from %s\n", count,
              path.c_str());
}

// Waits for SIGTERM or SIGINT (returned), reloading on SIGHUP and keeping
// the certificate expiry gauge fresh meanwhile.
int WaitForStop(const sigset_t& signals, Authenticator& authenticator,
                Metrics& metrics) {
  while (true) {
    RefreshCertificateExpiry(metrics);
    std::fflush(stdout);
    const timespec wait{30, 0};
    const int signal = sigtimedwait(&signals, nullptr, &wait);
    if (signal == SIGHUP) {
      ReloadAuth(authenticator);
    } else if (signal > 0) {
      return signal;
    }
  }
}

absl::StatusOr<HaOptions> HaFlags() {
  HaOptions options;
  options.etcd.endpoints = absl::GetFlag(FLAGS_etcd_endpoints);
  options.etcd.user = absl::GetFlag(FLAGS_etcd_user);
  if (const std::string file = absl::GetFlag(FLAGS_etcd_password_file);
      !file.empty()) {
    ASSIGN_OR_RETURN(options.etcd.password, ReadFile(file));
    while (!options.etcd.password.empty() &&
           options.etcd.password.back() == '\n') {
      options.etcd.password.pop_back();
    }
  }
  options.etcd.tls_files = {absl::GetFlag(FLAGS_etcd_ca),
                            absl::GetFlag(FLAGS_etcd_cert),
                            absl::GetFlag(FLAGS_etcd_key)};
  options.etcd.tls = !options.etcd.tls_files.ca_file.empty();
  options.replica_id = absl::GetFlag(FLAGS_replica_id);
  options.advertise_address = absl::GetFlag(FLAGS_advertise_address);
  if (options.advertise_address.empty()) {
    options.advertise_address = absl::GetFlag(FLAGS_listen);
  }
  options.prefix = absl::GetFlag(FLAGS_etcd_prefix);
  options.lease_ttl = absl::GetFlag(FLAGS_etcd_lease_ttl);
  options.snapshot_every_entries = absl::GetFlag(FLAGS_etcd_snapshot_entries);
  options.snapshot_every_mib = absl::GetFlag(FLAGS_etcd_snapshot_mib);
  options.max_batch_bytes = absl::GetFlag(FLAGS_etcd_max_batch_bytes);
  return options;
}

// The state store: the local RocksDB, or in HA mode (--etcd-endpoints) the
// replicated log (followed until this replica leads).
struct Stores {
  std::unique_ptr<storage::RocksDbStore> local;
  std::unique_ptr<HaReplica> ha;
  core::StateStore* state = nullptr;
  core::AuditStore* audit = nullptr;
  storage::RocksDbStore* rocks = nullptr;  // the local store, in both modes
};

// Backups copy the embedded store; in HA mode etcd holds the state of
// record, so CreateBackup is UNIMPLEMENTED there (docs/ha.md).
AdminService::Backup BackupOf(const Stores& stores) {
  if (stores.ha != nullptr) return nullptr;
  return [db = stores.rocks](const std::string& dir) {
    return db->CreateCheckpoint(dir);
  };
}

absl::StatusOr<Stores> OpenStores(const std::string& data_dir) {
  Stores stores;
  if (absl::GetFlag(FLAGS_etcd_endpoints).empty()) {
    ASSIGN_OR_RETURN(stores.local, storage::RocksDbStore::Open(data_dir));
    stores.state = stores.local.get();
    stores.audit = stores.local.get();
    stores.rocks = stores.local.get();
    return stores;
  }
  ASSIGN_OR_RETURN(HaOptions options, HaFlags());
  ASSIGN_OR_RETURN(stores.ha, HaReplica::Open(std::move(options), data_dir));
  stores.state = stores.ha->store();
  stores.audit = stores.ha->store();
  stores.rocks = stores.ha->store()->local();
  return stores;
}

struct Listening {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// The largest request served. In HA mode at most half the log's batch
// bound (docs/ha.md), so one command cannot make a batch etcd refuses.
int MaxMessageBytes(bool ha) {
  const int flag = absl::GetFlag(FLAGS_max_message_bytes);
  if (!ha) return flag;
  const int bound = static_cast<int>(storage::etcd::kDefaultMaxBatchBytes / 2);
  if (flag > bound) {
    std::printf("phalanxd: HA mode: --max-message-bytes capped at %d\n", bound);
  }
  return std::min(flag, bound);
}

Listening StartServer(const std::shared_ptr<grpc::ServerCredentials>& creds,
                      const std::vector<grpc::Service*>& services,
                      Metrics& metrics, int max_message_bytes) {
  grpc::ServerBuilder builder;
  Listening out;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen), creds, &out.port);
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(metrics.InterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  out.server = builder.BuildAndStart();
  return out;
}

// "HOST:PORT" of a --listen style address with its port replaced by the
// bound one.
std::string Bound(const std::string& listen, int port) {
  return absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
}

void PrintAddresses(const std::string& data_dir, size_t gangs,
                    absl::Duration recovery, int port, int metrics_port) {
  std::printf("phalanxd: recovered %zu gangs in %.3f s from %s\n", gangs,
              absl::ToDoubleSeconds(recovery), data_dir.c_str());
  // Scripts and tests read this line: keep its form.
  std::printf("phalanxd: grpc listening on %s%s\n",
              Bound(absl::GetFlag(FLAGS_listen), port).c_str(),
              absl::GetFlag(FLAGS_tls_cert).empty() ? "" : " (TLS)");
  std::printf("phalanxd: metrics listening on http://%s/metrics\n",
              Bound(absl::GetFlag(FLAGS_metrics_listen), metrics_port).c_str());
  std::fflush(stdout);
}

// --print-address-file: the bound addresses as JSON, written to a temporary
// file and renamed into place, so a reader sees the whole file or none.
absl::Status WriteAddressFile(const std::string& path, int port,
                              int metrics_port) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "{\"grpc\": \"" << Bound(absl::GetFlag(FLAGS_listen), port)
        << "\", \"metrics\": \""
        << Bound(absl::GetFlag(FLAGS_metrics_listen), metrics_port)
        << "\", \"pid\": " << getpid() << "}\n";
    out.close();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  std::error_code error;
  std::filesystem::rename(tmp, path, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path,
                                            ": ", error.message()));
  }
  return absl::OkStatus();
}

// The health service name SERVING on the HA leader only.
constexpr char kLeaderHealthService[] = "phalanx.v1.Leader";

// SIGTERM or SIGINT if one is pending (taken), else 0; a pending SIGHUP
// reloads --auth.
int TakeStopSignal(const sigset_t& signals, Authenticator& authenticator) {
  const timespec now{0, 0};
  const int signal = sigtimedwait(&signals, nullptr, &now);
  if (signal == SIGHUP) ReloadAuth(authenticator);
  return signal == SIGTERM || signal == SIGINT ? signal : 0;
}

// HA mode: follows the log (docs/ha.md) — each applied batch becomes the
// next read view and its events reach the watch streams, as on the leader
// — and reports progress to the metrics and the "" health service.
// HA follower: what the leader's loop takes from its config after every
// batch (watch settings, the default request rate), from the replicated one.
void FollowConfig(const core::Config& config, WatchHub& hub, Gate& gate) {
  hub.Configure(config);
  gate.rate_limiter().SetDefaults(config.limits.requests_per_second,
                                  config.limits.request_burst);
}

std::unique_ptr<Follower> StartFollower(
    HaReplica& ha, SchedulerLoop& loop, WatchHub& hub, Gate& gate,
    Metrics& metrics, grpc::HealthCheckServiceInterface* health) {
  Follower::Options options;
  options.prefix = ha.options().prefix;
  Follower::Hooks hooks;
  hooks.on_batch = [&loop, &hub, &gate](const core::Mutation& mutation) {
    if (mutation.config) FollowConfig(*mutation.config, hub, gate);
    loop.Replicate(mutation);
    hub.OnDurable(mutation, absl::ZeroDuration(), 0);
  };
  hooks.on_reset = [&loop, &hub, &gate, db = ha.store()->local()] {
    absl::StatusOr<core::LoadedState> state = db->LoadAll();
    if (!state.ok()) {
      std::fprintf(stderr, "phalanxd: follower: reloading: %s\n",
                   state.status().ToString().c_str());
      return;
    }
    if (state->config) FollowConfig(*state->config, hub, gate);
    loop.ReplaceView(ViewOfState(*state));
  };
  auto serving = std::make_shared<int>(-1);  // follower thread only
  hooks.on_progress = [&metrics, health,
                       serving](const FollowerProgress& progress) {
    metrics.SetReplication(progress.applied_seq,
                           progress.last_seq - progress.applied_seq);
    if (*serving != static_cast<int>(progress.caught_up)) {
      *serving = progress.caught_up;
      health->SetServingStatus("", progress.caught_up);
    }
  };
  auto follower = std::make_unique<Follower>(ha.client(), ha.store(),
                                             std::move(options), hooks);
  follower->Start();
  return follower;
}

// HA mode, once this replica has won the election and its follower has
// stopped: recovers exactly as a restart does (the log caught up first,
// start-up grace for leases, grace periods and deadlines, the start-up
// files applied and committed under the new term), and starts the loop.
absl::Status Promote(HaReplica& ha, const StartupFiles& files,
                     SchedulerLoop& loop, WatchHub& hub, AuditLog& audit) {
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(Recovered recovered, Recover(*ha.store(), files, start));
  ha.store()->set_apply_listener(nullptr);
  RETURN_IF_ERROR(audit.Resume());
  const size_t gangs = recovered.scheduler->gangs().size();
  loop.Lead(std::move(recovered.scheduler));
  if (!recovered.committed.empty()) {
    hub.OnDurable(recovered.committed, absl::ZeroDuration(), 0);
  }
  loop.Start();
  std::printf("phalanxd: promoted in %.3f s (%zu gangs, log seq %lld)\n",
              absl::ToDoubleSeconds(absl::Now() - start), gangs,
              static_cast<long long>(ha.store()->applied_seq()));
  return absl::OkStatus();
}

// The watch hub's sweep timing from its flags, each within 0s..10s.
absl::StatusOr<WatchFlush> WatchFlushFlags() {
  WatchFlush flush{absl::GetFlag(FLAGS_watch_sweep_quiet),
                   absl::GetFlag(FLAGS_watch_sweep_interval)};
  for (auto [name, value] : {std::pair{"quiet", flush.quiet},
                             std::pair{"interval", flush.interval}}) {
    if (value < absl::ZeroDuration() || value > absl::Seconds(10)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--watch-sweep-", name, ": must be in 0s..10s, not ",
                       absl::FormatDuration(value)));
    }
  }
  return flush;
}

int Serve() {
  const sigset_t signals = BlockSignals();
  auto authenticator = MakeAuthenticator();
  if (!authenticator.ok()) return Fail(authenticator.status().ToString());
  auto creds = Credentials();
  if (!creds.ok()) return Fail(creds.status().ToString());
  if (auto s = CheckListenAddresses(!absl::GetFlag(FLAGS_tls_cert).empty(),
                                    (*authenticator)->enabled());
      !s.ok()) {
    return Fail(s.ToString());
  }
  auto files =
      ReadStartupFiles(absl::GetFlag(FLAGS_config), absl::GetFlag(FLAGS_fleet),
                       absl::GetFlag(FLAGS_queues));
  if (!files.ok()) return Fail(files.status().ToString());
  auto flush = WatchFlushFlags();
  if (!flush.ok()) return Fail(flush.status().ToString());

  // Everything that serves lives in this block, so the time the shutdown
  // reports includes every destructor (threads joined, store closed).
  absl::Time stop_start, mark;
  std::string stages;
  {
    const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
    std::error_code error;
    std::filesystem::create_directories(data_dir, error);
    auto stores = OpenStores(data_dir);
    if (!stores.ok()) return Fail(stores.status().ToString());
    if (const int from = stores->rocks->opened_schema_version();
        from > 0 && from < storage::RocksDbStore::kSchemaVersion) {
      std::printf("phalanxd: migrated %s from schema version %d to %d\n",
                  data_dir.c_str(), from,
                  storage::RocksDbStore::kSchemaVersion);
    }
    const bool ha = stores->ha != nullptr;
    const absl::Time start = absl::Now();
    // Single node: recover now. HA: follow first — the view of the local
    // store once caught up with the log; the scheduler is restored only
    // when this replica leads.
    std::unique_ptr<core::Scheduler> scheduler;
    std::shared_ptr<const View> follower_view;
    std::optional<core::Config> follower_config;
    bool caught_up = true;
    if (!ha) {
      auto recovered = RecoverAndApply(*stores->state, *files, start);
      if (!recovered.ok()) return Fail(recovered.status().ToString());
      scheduler = *std::move(recovered);
    } else {
      if (auto applied = stores->ha->store()->CatchUp(); !applied.ok()) {
        caught_up = false;
        std::fprintf(stderr, "phalanxd: follower: catching up: %s\n",
                     applied.status().ToString().c_str());
      }
      auto state = stores->rocks->LoadAll();
      if (!state.ok()) return Fail(state.status().ToString());
      follower_view = ViewOfState(*state);
      follower_config = state->config;
    }
    const absl::Duration recovery = absl::Now() - start;
    const size_t gangs =
        ha ? follower_view->gangs.size() : scheduler->gangs().size();
    auto audit = AuditLog::Open(stores->audit);
    if (!audit.ok()) return Fail(audit.status().ToString());

    WatchHub hub(stores->state,
                 ha ? follower_view->revision : scheduler->revision(),
                 WatchHub::kDefaultRingCapacity, *flush);
    Metrics metrics(absl::GetFlag(FLAGS_metrics_listen), &hub);
    metrics.SetAuditDropped([log = audit->get()] { return log->dropped(); });
    metrics.SetWalSyncs([db = stores->rocks] { return db->WalSyncs(); });
    Gate gate(authenticator->get(), &metrics, audit->get());
    ReplicaRole role;
    if (ha) {
      gate.set_role(&role);
      metrics.SetLeader(false, 0);
      if (follower_config) FollowConfig(*follower_config, hub, gate);
    }
    const std::vector<BatchObserver*> observers = {audit->get(), &gate, &hub,
                                                   &metrics};
    std::unique_ptr<SchedulerLoop> loop =
        ha ? std::make_unique<SchedulerLoop>(follower_view, stores->state,
                                             observers)
           : std::make_unique<SchedulerLoop>(std::move(scheduler),
                                             stores->state, observers);
    SchedulerService scheduler_service(loop.get(), &hub, &gate);
    FleetService fleet_service(loop.get(), &gate);
    AdminService admin_service(loop.get(), &gate, audit->get(),
                               BackupOf(*stores));

    grpc::EnableDefaultHealthCheckService(true);
    // Reflection answers anyone; with --auth every RPC but health needs a
    // principal, so it is served in development mode only.
    if (!(*authenticator)->enabled()) {
      grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    }
    if (!ha) loop->Start();
    Listening grpc_server = StartServer(
        *creds, {&scheduler_service, &fleet_service, &admin_service}, metrics,
        MaxMessageBytes(ha));
    if (grpc_server.server == nullptr || grpc_server.port == 0) {
      loop->Stop();
      return Fail(
          absl::StrCat("cannot listen on ", absl::GetFlag(FLAGS_listen)));
    }
    grpc::HealthCheckServiceInterface* health =
        grpc_server.server->GetHealthCheckService();
    // "" is SERVING by default; in HA mode only once caught up, and
    // phalanx.v1.Leader only on the leader.
    std::unique_ptr<Follower> follower;
    if (ha) {
      health->SetServingStatus("", caught_up);
      health->SetServingStatus(kLeaderHealthService, false);
      // --advertise-address defaults to --listen: name the bound port.
      if (absl::EndsWith(stores->ha->advertise_address(), ":0")) {
        stores->ha->set_advertise_address(
            Bound(stores->ha->advertise_address(), grpc_server.port));
      }
      // Known before the address is printed: a write sent as soon as this
      // replica serves gets the hint.
      role.set_leader_address(stores->ha->LeaderAddress());
      follower = StartFollower(*stores->ha, *loop, hub, gate, metrics, health);
    }
    // The file first, so whoever sees the printed lines finds it written.
    if (const std::string path = absl::GetFlag(FLAGS_print_address_file);
        !path.empty()) {
      if (auto s = WriteAddressFile(path, grpc_server.port, metrics.port());
          !s.ok()) {
        grpc_server.server->Shutdown(std::chrono::system_clock::now());
        if (follower) follower->Stop();
        loop->Stop();
        return Fail(s.ToString());
      }
    }
    PrintAddresses(data_dir, gangs, recovery, grpc_server.port, metrics.port());

    int signal = 0;
    if (ha) {
      absl::Status led = stores->ha->WaitToLead(
          [&] {
            signal = TakeStopSignal(signals, **authenticator);
            return signal != 0;
          },
          [&role](const std::string& address) {
            role.set_leader_address(address);
          });
      if (led.ok()) {
        // Writes meanwhile name this replica: retried, they land here.
        role.set_leader_address(stores->ha->advertise_address());
        follower->Stop();
        // Before the loop starts: its thread reads it after each batch.
        metrics.SetAppliedSeq(
            [store = stores->ha->store()] { return store->applied_seq(); });
        led = Promote(*stores->ha, *files, *loop, hub, **audit);
      }
      if (led.ok()) {
        role.set_leading(true);
        role.set_leader_address(stores->ha->advertise_address());
        metrics.SetLeader(true, stores->ha->term());
        metrics.SetReplication(stores->ha->store()->applied_seq(), 0);
        health->SetServingStatus("", true);
        health->SetServingStatus(kLeaderHealthService, true);
        std::printf("phalanxd: serving as the leader\n");
        std::fflush(stdout);
      } else if (!absl::IsCancelled(led)) {
        // Leading without a scheduler helps nobody: give the lease up.
        std::fprintf(stderr, "phalanxd: promotion failed: %s\n",
                     led.ToString().c_str());
        grpc_server.server->Shutdown(std::chrono::system_clock::now());
        (void)stores->ha->Resign();
        return 1;
      }
    }
    if (signal == 0) signal = WaitForStop(signals, **authenticator, metrics);
    std::printf("phalanxd: signal %d, shutting down\n", signal);
    std::fflush(stdout);
    stop_start = absl::Now();
    mark = stop_start;
    auto stage = [&](absl::string_view name) {
      const absl::Time now = absl::Now();
      absl::StrAppend(
          &stages, stages.empty() ? "" : ", ", name, " ",
          absl::StrFormat("%.3f", absl::ToDoubleSeconds(now - mark)));
      mark = now;
    };
    hub.Shutdown();
    stage("watch");
    // Unary calls in flight need the loop (still running) for a few ms. The
    // deadline bounds the wait for clients that do not poll their connection
    // (an idle synchronous client never acks the GOAWAY ping), after which
    // gRPC closes the remaining connections: 3 s here was pure waiting.
    grpc_server.server->Shutdown(std::chrono::system_clock::now() +
                                 std::chrono::milliseconds(500));
    stage("grpc");
    if (follower) follower->Stop();
    loop->Stop();
    stage("loop");
    if (stores->ha && role.leading()) {
      // Hand over at once rather than after a lease TTL.
      if (absl::Status s = stores->ha->Resign(); !s.ok()) {
        std::printf("phalanxd: resign: %s\n", s.ToString().c_str());
      }
      stage("resign");
    }
    grpc_server.server.reset();
    stage("grpc-threads");
    metrics.StopServing();
    stage("metrics");
  }  // the remaining destructors: the watch hub's threads, the store
  const absl::Time stopped = absl::Now();
  std::printf("phalanxd: stopped in %.3f s (%s, rest %.3f)\n",
              absl::ToDoubleSeconds(stopped - stop_start), stages.c_str(),
              absl::ToDoubleSeconds(stopped - mark));
  return 0;
}

}  // namespace
}  // namespace phalanx::server

// Lets flags be spelled with dashes (--data-dir) as well as underscores.
void DashesToUnderscores(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--", 2) != 0) continue;
    for (char* c = argv[i] + 2; *c != '\0' && *c != '='; ++c) {
      if (*c == '-') *c = '_';
    }
  }
}

int main(int argc, char** argv) {
  // Debian's Abseil is built with Mutex deadlock detection on: every lock
  // then updates a global lock graph (3-4 % of the daemon's CPU in a watch
  // fan-out profile). Lock order is kept by design and by tests instead.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  DashesToUnderscores(argc, argv);
  absl::SetProgramUsageMessage(
      "phalanxd [--listen ADDR] [--data-dir DIR] [--metrics-listen ADDR] "
      "[--config FILE] [--fleet FILE] [--queues FILE] [--auth FILE] "
      "[--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]] "
      "[--etcd-endpoints URL[,URL...] --replica-id ID [--advertise-address "
      "HOST:PORT] [--etcd-prefix /phalanx/NAME] [--etcd-lease-ttl 5s]]");
  absl::FlagsUsageConfig usage;
  usage.version_string = [] {
    return std::string("phalanxd " PHALANX_VERSION_STRING "\n");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  return phalanx::server::Serve();
}
