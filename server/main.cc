// phalanxd: the Phalanx gang-scheduling daemon. Reads its flags into
// DaemonOptions, starts a Daemon (server/daemon.h), serves until SIGTERM or
// SIGINT (SIGHUP re-reads --auth), shuts the daemon down and exits 0; 1
// when it cannot start or, in HA mode, cannot promote itself. With
// --check-store it only checks the store in --data-dir and exits.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "phalanx_version.h"
#include "server/daemon.h"
#include "server/daemon_options.h"
#include "storage/store_check.h"

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "phalanxd: %s\n", status.ToString().c_str());
  return 1;
}

// `phalanxd --check-store`: 0 when the store in `data_dir` passes its
// consistency check, else 1 with the first inconsistency.
int CheckStore(const std::string& data_dir) {
  const absl::Status consistent =
      phalanx::storage::CheckStoreConsistency(data_dir);
  if (!consistent.ok()) {
    return Fail(absl::Status(
        consistent.code(),
        absl::StrCat("--check-store: ", data_dir, ": ", consistent.message())));
  }
  std::printf("phalanxd: --check-store: %s: the store is consistent\n",
              data_dir.c_str());
  return 0;
}

// Blocks SIGTERM, SIGINT and SIGHUP in every thread (call before starting
// any), so TakeSignals can take them.
sigset_t BlockSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// Until SIGTERM or SIGINT (or `done`): reloads --auth on SIGHUP; on a stop
// signal makes Serve return.
void TakeSignals(const sigset_t& signals, phalanx::server::Daemon& daemon,
                 const std::atomic<bool>& done) {
  while (true) {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0 || done) return;
    if (signal == SIGHUP) {
      daemon.ReloadAuth();
      std::fflush(stdout);
      continue;
    }
    std::printf("phalanxd: signal %d, shutting down\n", signal);
    std::fflush(stdout);
    daemon.RequestStop();
    return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built with Mutex deadlock detection on: every lock
  // then updates a global lock graph (3-4 % of the daemon's CPU in a watch
  // fan-out profile). Lock order is kept by design and by tests instead.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  phalanx::server::ParseDaemonFlags(
      argc, argv, std::string("phalanxd " PHALANX_VERSION_STRING "\n"));
  const sigset_t signals = BlockSignals();
  absl::StatusOr<phalanx::server::DaemonOptions> options =
      phalanx::server::DaemonOptionsFromFlags();
  if (!options.ok()) return Fail(options.status());
  if (options->check_store) return CheckStore(options->data_dir);
  phalanx::server::Daemon daemon;
  if (absl::Status s = daemon.Start(*std::move(options)); !s.ok()) {
    return Fail(s);
  }
  std::atomic<bool> done{false};
  std::thread signal_thread([&] { TakeSignals(signals, daemon, done); });
  const absl::Status served = daemon.Serve();
  // Serve returns OK once the signal thread took a stop signal; an error (a
  // failed promotion) leaves that thread waiting: wake it.
  done = true;
  if (!served.ok()) pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  daemon.Shutdown();
  return served.ok() ? 0 : 1;
}
