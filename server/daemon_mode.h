// DaemonMode: how a Daemon holds its state — alone on its local RocksDB
// (MakeSingleNodeMode, here) or as one replica of an HA cluster on etcd
// (MakeHaMode, server/ha_mode.h; docs/ha.md). The Daemon builds the parts
// every daemon has (DaemonParts) and calls its mode at each step of its
// life, in the order the methods are declared. Owned by the Daemon; called
// from the thread that runs Start, Serve and Shutdown (Serve may be another
// thread than Start's, never at the same time).
#ifndef PHALANX_SERVER_DAEMON_MODE_H_
#define PHALANX_SERVER_DAEMON_MODE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/scheduler.h"
#include "core/state_store.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/admin_service.h"
#include "server/audit_log.h"
#include "server/gate.h"
#include "server/metrics.h"
#include "server/scheduler_loop.h"
#include "server/startup.h"
#include "server/watch_hub.h"
#include "storage/rocksdb_store.h"

namespace phalanx::server {

// The stores a mode opened; they live as long as the mode.
struct DaemonStores {
  core::StateStore* state = nullptr;
  core::AuditStore* audit = nullptr;
  storage::RocksDbStore* local = nullptr;  // the local RocksDB, in both modes
  AdminService::Backup backup;             // null: CreateBackup UNIMPLEMENTED
};

// What serving starts from: a recovered scheduler (the loop leads at once),
// or the view a following replica serves (the loop follows).
struct StartState {
  std::unique_ptr<core::Scheduler> scheduler;
  // When scheduler is null: the view to follow from. With held_cause not
  // OK: the view of the store's durable state.
  std::shared_ptr<const View> view;
  int64_t revision = 0;
  size_t gangs = 0;
  // Not OK when the store refused recovery's batch (a full disk): `held`,
  // which the scheduler already reflects, is for the loop to hold.
  absl::Status held_cause;
  core::Mutation held;
};

// The daemon's parts a mode wires into; owned by the Daemon, alive from
// Attach until Resign has returned (they are destroyed before the mode).
struct DaemonParts {
  const StartupFiles* files = nullptr;
  AuditLog* audit = nullptr;
  WatchHub* hub = nullptr;
  Metrics* metrics = nullptr;
  Gate* gate = nullptr;
  SchedulerLoop* loop = nullptr;
};

class DaemonMode {
 public:
  virtual ~DaemonMode() = default;

  // The stores the mode opened; valid for its life.
  virtual DaemonStores stores() = 0;
  // Recovers what the daemon serves first (the start-up files applied when
  // it leads). Fails naming the cause.
  virtual absl::StatusOr<StartState> Recover(const StartupFiles& files) = 0;
  // The largest request to serve, given the one asked for.
  virtual int MaxMessageBytes(int requested) = 0;
  // Wires the mode into `parts` before gRPC serves.
  virtual void Attach(const DaemonParts& parts) = 0;
  // gRPC serves on `port`; `health` is its health service (which outlives
  // the mode's use of it: until StopFollowing).
  virtual void OnServing(int port,
                         grpc::HealthCheckServiceInterface* health) = 0;
  // Returns once this daemon leads (OK), `stop()` has returned true (OK),
  // or leading failed (the error; the daemon should then shut down).
  virtual absl::Status Lead(const std::function<bool()>& stop) = 0;
  // Shutdown, once gRPC stopped and before the loop stops.
  virtual void StopFollowing() = 0;
  // Shutdown, once the loop stopped: hands leadership over at once. Returns
  // whether there was anything to hand over.
  virtual bool Resign() = 0;
};

// "HOST:PORT" of a --listen style address with its port replaced by the
// bound one.
std::string BoundAddress(const std::string& listen, int port);

// The text of the file at `path`; NotFound ("cannot read PATH") when it
// cannot be read.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

// The single-node mode: the local RocksDB in `data_dir` holds the state,
// its files going through `env` (null = RocksDB's default; tests only).
absl::StatusOr<std::unique_ptr<DaemonMode>> MakeSingleNodeMode(
    const std::string& data_dir, rocksdb::Env* env = nullptr);

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_DAEMON_MODE_H_
