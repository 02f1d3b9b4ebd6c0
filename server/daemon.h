// Daemon: one phalanxd in a process — its store, scheduler loop, watch hub,
// gate, metrics and gRPC server — started from DaemonOptions, in the
// single-node or the HA mode (server/daemon_mode.h). phalanxd's main runs
// one; a test may run several, one after another or side by side (each
// with its own ports and data directory): the Daemon reads no flag, touches
// no signal disposition and registers nothing process-wide but gRPC's
// default health service.
//
// Lifecycle: Start, then Serve (blocks until RequestStop; in HA mode it
// campaigns and promotes meanwhile), then Shutdown. A single-node daemon
// serves from Start on, so Serve is optional there. Start, Serve and
// Shutdown are called from one thread at a time; RequestStop, ReloadAuth
// and the accessors from any thread once Start has returned OK.
#ifndef PHALANX_SERVER_DAEMON_H_
#define PHALANX_SERVER_DAEMON_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "server/daemon_options.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {

struct DaemonRunning;  // what a started Daemon runs (daemon.cc)

class Daemon {
 public:
  Daemon();
  ~Daemon();  // Shutdown()
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Checks `options` (CheckDaemonOptions), reads the files they name,
  // opens the store, recovers, binds the gRPC and metrics ports and
  // serves; prints the bound addresses (and writes the address file) last.
  // On error nothing is left running and the daemon may be started again.
  // FailedPrecondition when already started.
  absl::Status Start(DaemonOptions options);

  // Blocks until RequestStop. In HA mode, campaigns meanwhile and, on
  // winning, promotes this replica; fails (and gives the lease up) when
  // the promotion fails. Refreshes the TLS certificate expiry gauge and
  // flushes stdout every 30 s.
  absl::Status Serve();
  // Makes Serve return (at most one lease TTL later while campaigning).
  void RequestStop();
  // Re-reads the --auth file (SIGHUP); a file that does not parse keeps
  // the old principals. Prints what it did.
  void ReloadAuth();

  // Ends watch streams, drains in-flight calls (at most 0.5 s), stops the
  // loop, resigns leadership, stops gRPC and metrics, closes the store, and
  // prints how long each stage took. Idempotent; the daemon may then be
  // started again.
  void Shutdown();

  // The bound gRPC address ("HOST:PORT"), and ports; 0/"" when not serving.
  std::string grpc_address() const;
  int grpc_port() const;
  int metrics_port() const;

 private:
  bool stop_requested() const;

  mutable Mutex mu_;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  std::string grpc_address_ ABSL_GUARDED_BY(mu_);
  int grpc_port_ ABSL_GUARDED_BY(mu_) = 0;
  int metrics_port_ ABSL_GUARDED_BY(mu_) = 0;
  // Set by Start, reset by Shutdown (from the thread running them).
  std::unique_ptr<DaemonRunning> running_;
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_DAEMON_H_
