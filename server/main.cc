// phalanxd: the Phalanx gang-scheduling daemon. Recovers its state from
// RocksDB, applies the start-up files, serves gRPC (Scheduler, Fleet, Admin,
// health, reflection) and /metrics, and on SIGTERM or SIGINT ends watch
// streams, drains in-flight calls, closes the store and exits 0.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/admin_service.h"
#include "server/fleet_service.h"
#include "server/metrics.h"
#include "server/scheduler_loop.h"
#include "server/scheduler_service.h"
#include "server/startup.h"
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
          "Allow listening on a non-loopback address without TLS");

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

// Blocks SIGTERM and SIGINT in every thread (call before starting any), so
// WaitForSignal can take them.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

int Serve() {
  const sigset_t stop_signals = BlockStopSignals();
  const std::string listen = absl::GetFlag(FLAGS_listen);
  if (!IsLoopback(listen) && !absl::GetFlag(FLAGS_insecure)) {
    return Fail(absl::StrCat("--listen ", listen,
                             " is not loopback; TLS is not built yet, so pass "
                             "--insecure to serve it in plain text"));
  }
  auto files =
      ReadStartupFiles(absl::GetFlag(FLAGS_config), absl::GetFlag(FLAGS_fleet),
                       absl::GetFlag(FLAGS_queues));
  if (!files.ok()) return Fail(files.status().ToString());

  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  std::error_code error;
  std::filesystem::create_directories(data_dir, error);
  auto store = storage::RocksDbStore::Open(data_dir);
  if (!store.ok()) return Fail(store.status().ToString());
  const absl::Time start = absl::Now();
  auto scheduler = RecoverAndApply(**store, *files, start);
  if (!scheduler.ok()) return Fail(scheduler.status().ToString());
  const absl::Duration recovery = absl::Now() - start;
  const size_t gangs = (*scheduler)->gangs().size();

  WatchHub hub(store->get(), (*scheduler)->revision());
  Metrics metrics(absl::GetFlag(FLAGS_metrics_listen), &hub);
  SchedulerLoop loop(*std::move(scheduler), store->get(), {&hub, &metrics});
  SchedulerService scheduler_service(&loop, &hub);
  FleetService fleet_service(&loop);
  AdminService admin_service(&loop);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  builder.RegisterService(&scheduler_service);
  builder.RegisterService(&fleet_service);
  builder.RegisterService(&admin_service);
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(metrics.InterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  loop.Start();
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    loop.Stop();
    return Fail(absl::StrCat("cannot listen on ", listen));
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  const std::string metrics_host =
      absl::GetFlag(FLAGS_metrics_listen)
          .substr(0, absl::GetFlag(FLAGS_metrics_listen).rfind(':'));
  std::printf("phalanxd: recovered %zu gangs in %.3f s from %s\n", gangs,
              absl::ToDoubleSeconds(recovery), data_dir.c_str());
  std::printf("phalanxd: grpc listening on %s:%d\n", host.c_str(), port);
  std::printf("phalanxd: metrics listening on http://%s:%d/metrics\n",
              metrics_host.c_str(), metrics.port());
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop_signals, &signal);
  std::printf("phalanxd: signal %d, shutting down\n", signal);
  std::fflush(stdout);
  const absl::Time stop_start = absl::Now();
  hub.Shutdown();
  // Unary calls in flight need the loop (still running) for a few ms. The
  // deadline bounds the wait for clients that do not poll their connection
  // (an idle synchronous client never acks the GOAWAY ping), after which
  // gRPC closes the remaining connections: 3 s here was pure waiting.
  server->Shutdown(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(500));
  loop.Stop();
  std::printf("phalanxd: stopped in %.3f s\n",
              absl::ToDoubleSeconds(absl::Now() - stop_start));
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
      "[--config FILE] [--fleet FILE] [--queues FILE]");
  absl::ParseCommandLine(argc, argv);
  return phalanx::server::Serve();
}
