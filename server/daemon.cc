#include "server/daemon.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "proto/auth_config.h"
#include "server/admin_service.h"
#include "server/audit_log.h"
#include "server/auth.h"
#include "server/daemon_mode.h"
#include "server/fleet_service.h"
#include "server/gate.h"
#include "server/ha_mode.h"
#include "server/metrics.h"
#include "server/scheduler_loop.h"
#include "server/scheduler_service.h"
#include "server/startup.h"
#include "server/tls.h"
#include "server/watch_hub.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {

// Everything that serves, declared in the order it is built: destroyed in
// reverse, each part before what it points to.
struct DaemonRunning {
  DaemonOptions options;
  std::unique_ptr<Authenticator> authenticator;
  std::shared_ptr<grpc::ServerCredentials> credentials;
  StartupFiles files;
  std::unique_ptr<DaemonMode> mode;
  std::unique_ptr<AuditLog> audit;
  std::unique_ptr<WatchHub> hub;
  std::unique_ptr<Metrics> metrics;
  std::unique_ptr<Gate> gate;
  std::unique_ptr<SchedulerLoop> loop;
  std::unique_ptr<SchedulerService> scheduler_service;
  std::unique_ptr<FleetService> fleet_service;
  std::unique_ptr<AdminService> admin_service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

namespace {

absl::StatusOr<auth::AuthPolicy> ReadAuthFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  absl::StatusOr<auth::AuthPolicy> policy = auth::ParseAuthConfigJson(text);
  if (!policy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth ", path, ": ", policy.status().message()));
  }
  return policy;
}

absl::StatusOr<std::unique_ptr<Authenticator>> MakeAuthenticator(
    const std::string& path) {
  if (path.empty()) {
    std::fprintf(stderr,
                 "phalanxd: WARNING: no --auth: every caller is an ADMIN. "
                 "This is development mode; give --auth FILE before anyone "
                 "else can reach this daemon.\n");
    return std::make_unique<Authenticator>();
  }
  ASSIGN_OR_RETURN(auth::AuthPolicy policy, ReadAuthFile(path));
  std::printf("phalanxd: %zu principals from %s\n", policy.principals.size(),
              path.c_str());
  return std::make_unique<Authenticator>(std::move(policy));
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(
    const TlsFiles& files) {
  if (files.cert.empty() && files.key.empty()) {
    return grpc::InsecureServerCredentials();
  }
  return TlsCredentials(files);
}

absl::StatusOr<std::unique_ptr<DaemonMode>> OpenMode(
    const DaemonOptions& options) {
  std::error_code error;
  std::filesystem::create_directories(options.data_dir, error);
  if (options.ha_mode()) {
    return MakeHaMode(options.ha, options.etcd_password_file, options.data_dir);
  }
  return MakeSingleNodeMode(options.data_dir, options.storage_env);
}

void PrintMigration(const storage::RocksDbStore& db,
                    const std::string& data_dir) {
  if (const int from = db.opened_schema_version();
      from > 0 && from < storage::RocksDbStore::kSchemaVersion) {
    std::printf("phalanxd: migrated %s from schema version %d to %d\n",
                data_dir.c_str(), from, storage::RocksDbStore::kSchemaVersion);
  }
}

// A following loop serves its reads from the local store's state at one
// instant (a RocksDB snapshot: the follower's apply goes on meanwhile); a
// leading one does the same while its writes are refused (the local store
// then holds the last durable batch).
std::unique_ptr<SchedulerLoop> MakeLoop(StartState state,
                                        const DaemonStores& stores,
                                        std::vector<BatchObserver*> observers) {
  core::StateStore* store = stores.state;
  SchedulerLoop::ReplicaLoader durable_state =
      [db = stores.local]() -> absl::StatusOr<core::LoadedState> {
    ASSIGN_OR_RETURN(std::unique_ptr<storage::FrozenState> frozen,
                     db->Freeze());
    return frozen->Load();
  };
  if (state.scheduler == nullptr) {
    return std::make_unique<SchedulerLoop>(std::move(state.view), store,
                                           std::move(observers),
                                           std::move(durable_state));
  }
  auto loop = std::make_unique<SchedulerLoop>(std::move(state.scheduler), store,
                                              std::move(observers),
                                              std::move(durable_state));
  if (!state.held_cause.ok()) {
    loop->HoldAtStart(std::move(state.held), state.held_cause,
                      std::move(state.view));
  }
  return loop;
}

// Serves gRPC reflection on one server, or not. Linking gRPC's reflection
// library registers its plugin for every server of the process (a static
// initializer); this option removes it, then adds it back where wanted.
class ReflectionOption : public grpc::ServerBuilderOption {
 public:
  explicit ReflectionOption(bool serve) : serve_(serve) {}
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    auto reflection =
        std::make_unique<grpc::reflection::ProtoServerReflectionPlugin>();
    const std::string name = reflection->name();
    std::erase_if(*plugins, [&name](const auto& plugin) {
      return plugin->name() == name;
    });
    if (serve_) plugins->push_back(std::move(reflection));
  }

 private:
  const bool serve_;
};

// Builds and starts the gRPC server on the mode's message bound, and tells
// the mode it serves.
absl::Status StartGrpc(DaemonRunning& r) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(r.options.listen, r.credentials, &r.port);
  builder.SetMaxReceiveMessageSize(
      r.mode->MaxMessageBytes(r.options.max_message_bytes));
  builder.RegisterService(r.scheduler_service.get());
  builder.RegisterService(r.fleet_service.get());
  builder.RegisterService(r.admin_service.get());
  // Reflection answers anyone; with --auth every RPC but health needs a
  // principal, so it is served in development mode only.
  builder.SetOption(
      std::make_unique<ReflectionOption>(!r.authenticator->enabled()));
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(r.metrics->InterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  r.server = builder.BuildAndStart();
  if (r.server == nullptr || r.port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", r.options.listen));
  }
  r.mode->OnServing(r.port, r.server->GetHealthCheckService());
  return absl::OkStatus();
}

void PrintAddresses(const DaemonOptions& options, size_t gangs,
                    absl::Duration recovery, int port, int metrics_port) {
  std::printf("phalanxd: recovered %zu gangs in %.3f s from %s\n", gangs,
              absl::ToDoubleSeconds(recovery), options.data_dir.c_str());
  // Scripts and tests read this line: keep its form.
  std::printf("phalanxd: grpc listening on %s%s\n",
              BoundAddress(options.listen, port).c_str(),
              options.tls.cert.empty() ? "" : " (TLS)");
  std::printf("phalanxd: metrics listening on http://%s/metrics\n",
              BoundAddress(options.metrics_listen, metrics_port).c_str());
  std::fflush(stdout);
}

// --print-address-file: the bound addresses as JSON, written to a temporary
// file and renamed into place, so a reader sees the whole file or none.
absl::Status WriteAddressFile(const DaemonOptions& options, int port,
                              int metrics_port) {
  const std::string& path = options.print_address_file;
  const std::string tmp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "{\"grpc\": \"" << BoundAddress(options.listen, port)
        << "\", \"metrics\": \""
        << BoundAddress(options.metrics_listen, metrics_port)
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

void RefreshCertificateExpiry(const std::string& cert, Metrics& metrics) {
  if (cert.empty()) return;
  if (auto not_after = CertificateNotAfter(cert); not_after.ok()) {
    metrics.SetCertificateExpiry(*not_after);
  }
}

// Times the stages of a shutdown: "watch 0.000, grpc 0.038, ...".
class StageClock {
 public:
  void Mark(absl::string_view name) {
    const absl::Time now = absl::Now();
    absl::StrAppend(
        &stages_, stages_.empty() ? "" : ", ", name, " ",
        absl::StrFormat("%.3f", absl::ToDoubleSeconds(now - mark_)));
    mark_ = now;
  }
  absl::Time start() const { return start_; }
  absl::Time mark() const { return mark_; }
  const std::string& stages() const { return stages_; }

 private:
  absl::Time start_ = absl::Now();
  absl::Time mark_ = start_;
  std::string stages_;
};

// Stops what runs, in the order that lets each stage finish what the
// previous one started; copes with a partly started daemon.
void StopServing(DaemonRunning& r, StageClock& clock) {
  if (r.hub) r.hub->Shutdown();
  clock.Mark("watch");
  // Unary calls in flight need the loop (still running) for a few ms. The
  // deadline bounds the wait for clients that do not poll their connection
  // (an idle synchronous client never acks the GOAWAY ping), after which
  // gRPC closes the remaining connections: 3 s here was pure waiting.
  if (r.server) {
    r.server->Shutdown(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(500));
  }
  clock.Mark("grpc");
  if (r.mode) r.mode->StopFollowing();
  if (r.loop) r.loop->Stop();
  clock.Mark("loop");
  if (r.mode && r.mode->Resign()) clock.Mark("resign");
  r.server.reset();
  clock.Mark("grpc-threads");
  if (r.metrics) r.metrics->StopServing();
  clock.Mark("metrics");
}

// The files the options name: principals, TLS credentials, start-up files.
absl::Status ReadInputs(DaemonRunning& r) {
  ASSIGN_OR_RETURN(r.authenticator, MakeAuthenticator(r.options.auth_file));
  ASSIGN_OR_RETURN(r.credentials, Credentials(r.options.tls));
  ASSIGN_OR_RETURN(r.files,
                   ReadStartupFiles(r.options.config_file, r.options.fleet_file,
                                    r.options.queues_file));
  return absl::OkStatus();
}

struct Recovery {
  StartState state;
  absl::Duration took;
};

absl::StatusOr<Recovery> OpenAndRecover(DaemonRunning& r) {
  ASSIGN_OR_RETURN(r.mode, OpenMode(r.options));
  PrintMigration(*r.mode->stores().local, r.options.data_dir);
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(StartState state, r.mode->Recover(r.files));
  return Recovery{std::move(state), absl::Now() - start};
}

// The audit log, watch hub, metrics, gate, loop and services over the
// mode's stores, wired into the mode.
absl::Status BuildParts(DaemonRunning& r, StartState state) {
  const DaemonStores stores = r.mode->stores();
  ASSIGN_OR_RETURN(r.audit, AuditLog::Open(stores.audit));
  r.hub = std::make_unique<WatchHub>(stores.state, state.revision,
                                     WatchHub::kDefaultRingCapacity,
                                     r.options.watch_flush);
  r.metrics = std::make_unique<Metrics>(r.options.metrics_listen, r.hub.get());
  r.metrics->SetAuditDropped([log = r.audit.get()] { return log->dropped(); });
  r.metrics->SetWalSyncs([db = stores.local] { return db->WalSyncs(); });
  r.gate = std::make_unique<Gate>(r.authenticator.get(), r.metrics.get(),
                                  r.audit.get());
  r.loop =
      MakeLoop(std::move(state), stores,
               {r.audit.get(), r.gate.get(), r.hub.get(), r.metrics.get()});
  r.scheduler_service = std::make_unique<SchedulerService>(
      r.loop.get(), r.hub.get(), r.gate.get());
  r.fleet_service = std::make_unique<FleetService>(r.loop.get(), r.gate.get());
  r.admin_service = std::make_unique<AdminService>(
      r.loop.get(), r.gate.get(), r.audit.get(), stores.backup);
  r.mode->Attach({&r.files, r.audit.get(), r.hub.get(), r.metrics.get(),
                  r.gate.get(), r.loop.get()});
  return absl::OkStatus();
}

// Start-up, step by step: what the options name, the store and what it
// holds, the parts that serve it, then gRPC.
absl::Status StartRunning(DaemonRunning& r) {
  RETURN_IF_ERROR(ReadInputs(r));
  ASSIGN_OR_RETURN(Recovery recovery, OpenAndRecover(r));
  const size_t gangs = recovery.state.gangs;
  RETURN_IF_ERROR(BuildParts(r, std::move(recovery.state)));
  RETURN_IF_ERROR(StartGrpc(r));
  // The file first, so whoever sees the printed lines finds it written.
  if (!r.options.print_address_file.empty()) {
    RETURN_IF_ERROR(WriteAddressFile(r.options, r.port, r.metrics->port()));
  }
  PrintAddresses(r.options, gangs, recovery.took, r.port, r.metrics->port());
  return absl::OkStatus();
}

}  // namespace

Daemon::Daemon() = default;
Daemon::~Daemon() { Shutdown(); }

absl::Status Daemon::Start(DaemonOptions options) {
  if (running_ != nullptr) {
    return absl::FailedPreconditionError("the daemon is already started");
  }
  RETURN_IF_ERROR(CheckDaemonOptions(options));
  auto running = std::make_unique<DaemonRunning>();
  running->options = std::move(options);
  if (absl::Status started = StartRunning(*running); !started.ok()) {
    StageClock clock;
    StopServing(*running, clock);
    return started;
  }
  MutexLock lock(&mu_);
  stop_requested_ = false;
  grpc_port_ = running->port;
  grpc_address_ = BoundAddress(running->options.listen, running->port);
  metrics_port_ = running->metrics->port();
  running_ = std::move(running);
  return absl::OkStatus();
}

absl::Status Daemon::Serve() {
  if (running_ == nullptr) {
    return absl::FailedPreconditionError("the daemon is not started");
  }
  RETURN_IF_ERROR(running_->mode->Lead([this] { return stop_requested(); }));
  while (true) {
    RefreshCertificateExpiry(running_->options.tls.cert, *running_->metrics);
    std::fflush(stdout);
    MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stop_requested_),
                             absl::Seconds(30))) {
      return absl::OkStatus();
    }
  }
}

void Daemon::RequestStop() {
  MutexLock lock(&mu_);
  stop_requested_ = true;
}

bool Daemon::stop_requested() const {
  MutexLock lock(&mu_);
  return stop_requested_;
}

void Daemon::ReloadAuth() {
  if (running_ == nullptr) return;
  Authenticator& authenticator = *running_->authenticator;
  const std::string& path = running_->options.auth_file;
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

void Daemon::Shutdown() {
  if (running_ == nullptr) return;
  StageClock clock;
  StopServing(*running_, clock);
  {
    MutexLock lock(&mu_);
    grpc_address_.clear();
    grpc_port_ = metrics_port_ = 0;
  }
  // The time reported includes every destructor (threads joined, store
  // closed).
  running_.reset();
  const absl::Time stopped = absl::Now();
  std::printf("phalanxd: stopped in %.3f s (%s, rest %.3f)\n",
              absl::ToDoubleSeconds(stopped - clock.start()),
              clock.stages().c_str(),
              absl::ToDoubleSeconds(stopped - clock.mark()));
  std::fflush(stdout);
}

std::string Daemon::grpc_address() const {
  MutexLock lock(&mu_);
  return grpc_address_;
}

int Daemon::grpc_port() const {
  MutexLock lock(&mu_);
  return grpc_port_;
}

int Daemon::metrics_port() const {
  MutexLock lock(&mu_);
  return metrics_port_;
}

}  // namespace phalanx::server
