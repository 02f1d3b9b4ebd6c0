// DaemonOptions: every setting of one phalanxd, as a plain value. phalanxd
// reads it from its command line once (DaemonOptionsFromFlags); a test
// builds one by hand and hands it to Daemon::Start. The files it names
// (--auth, --tls-*, --config, --fleet, --queues, --etcd-password-file) are
// read by Daemon::Start, not here. Plain data: copyable, no thread-safety
// of its own.
#ifndef PHALANX_SERVER_DAEMON_OPTIONS_H_
#define PHALANX_SERVER_DAEMON_OPTIONS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/ha_mode.h"
#include "server/tls.h"
#include "server/watch_hub.h"

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace phalanx::server {

struct DaemonOptions {
  std::string listen = "127.0.0.1:50051";  // gRPC; port 0 picks one
  std::string data_dir = "./var/phalanx";  // RocksDB (created if missing)
  std::string metrics_listen = "127.0.0.1:9464";  // port 0 picks one
  // Start-up files (proto3 JSON; "" = none), applied at a start when their
  // text changed since they were last applied (server/startup.h).
  std::string config_file;
  std::string fleet_file;
  std::string queues_file;
  int max_message_bytes = 4 << 20;
  // Allows listening beyond loopback without TLS and --auth (gRPC) or at
  // all (metrics).
  bool insecure = false;
  std::string auth_file;  // "" = development mode: every caller an admin
  TlsFiles tls;           // cert and key empty = plaintext
  WatchFlush watch_flush;
  // Once serving, the bound addresses are written here as JSON ("" = not).
  std::string print_address_file;
  // Check the store in data_dir (storage/store_check.h) and exit instead
  // of serving; phalanxd's main does it, not the Daemon.
  bool check_store = false;
  // HA mode when ha.etcd.endpoints is not empty (docs/ha.md). Its
  // etcd.password is read from etcd_password_file at start.
  HaOptions ha;
  std::string etcd_password_file;
  // Test-only, set by no flag: the RocksDB Env the single-node store's
  // files go through (null = RocksDB's default). Disk-fault tests pass one
  // over storage/fault_fs.h. Not owned; must outlive the daemon.
  rocksdb::Env* storage_env = nullptr;

  bool ha_mode() const { return !ha.etcd.endpoints.empty(); }
};

// OK when `options` can be served; else InvalidArgument (a value out of
// range) or FailedPrecondition (a non-loopback address without TLS and
// --auth or --insecure), the message naming the flag at fault as phalanxd
// spells it ("--watch-sweep-quiet: must be in 0s..10s, not 11s").
absl::Status CheckDaemonOptions(const DaemonOptions& options);

// Parses phalanxd's command line into the flags (spelled with dashes,
// --data-dir, or underscores), with phalanxd's usage text and `version`
// for --version; exits as Abseil does on --help or a bad flag.
void ParseDaemonFlags(int argc, char** argv, std::string version);

// The options phalanxd's flags give (--advertise-address defaulting to
// --listen), checked by CheckDaemonOptions. Call after ParseDaemonFlags.
absl::StatusOr<DaemonOptions> DaemonOptionsFromFlags();

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_DAEMON_OPTIONS_H_
