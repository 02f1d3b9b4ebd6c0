// phalanxd's command-line flags, and the one function that reads them.
#include "server/daemon_options.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/status_macros.h"
#include "storage/etcd/etcd_state_store.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "gRPC address; port 0 picks a free port (printed at start)");
ABSL_FLAG(std::string, data_dir, "./var/phalanx", "RocksDB directory");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Prometheus /metrics address; port 0 picks a free port");
ABSL_FLAG(std::string, config, "",
          "Config file (proto3 JSON of phalanx.v1.Config), applied at start "
          "when its text changed since it was last applied");
ABSL_FLAG(std::string, fleet, "",
          "Nodes to upsert at start when the file's text changed since it "
          "was last applied (JSON of phalanx.v1.UpsertNodesRequest)");
ABSL_FLAG(std::string, queues, "",
          "Queues to put at start when the file's text changed since it was "
          "last applied (JSON of phalanx.v1.ListQueuesResponse)");
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
ABSL_FLAG(bool, check_store, false,
          "Check the store in --data-dir (stopped: no phalanxd may have it "
          "open) for consistency and exit: 0 when it passes, 1 naming the "
          "first inconsistency (docs/operations.md)");
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

bool IsLoopback(const std::string& address) {
  return absl::StartsWith(address, "127.") ||
         absl::StartsWith(address, "localhost:") ||
         absl::StartsWith(address, "[::1]:");
}

// Beyond loopback, gRPC needs TLS and --auth (or --insecure), and metrics
// (plain HTTP) need --insecure.
absl::Status CheckListenAddresses(const DaemonOptions& options) {
  const bool tls = !options.tls.cert.empty();
  const bool auth = !options.auth_file.empty();
  if (!IsLoopback(options.listen) && !options.insecure && !(tls && auth)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--listen ", options.listen,
                     " is not loopback: serve it with --tls-cert, "
                     "--tls-key and --auth, or pass --insecure"));
  }
  if (!IsLoopback(options.metrics_listen) && !options.insecure) {
    return absl::FailedPreconditionError(
        absl::StrCat("--metrics-listen ", options.metrics_listen,
                     " is not loopback and /metrics has no "
                     "TLS: put it behind a proxy, or pass --insecure"));
  }
  return absl::OkStatus();
}

absl::Status CheckTls(const TlsFiles& tls) {
  if (tls.cert.empty() && tls.key.empty() && !tls.client_ca.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs --tls-cert and --tls-key");
  }
  return absl::OkStatus();
}

// The watch hub's sweep timing, each within 0s..10s.
absl::Status CheckWatchFlush(const WatchFlush& flush) {
  for (auto [name, value] : {std::pair{"quiet", flush.quiet},
                             std::pair{"interval", flush.interval}}) {
    if (value < absl::ZeroDuration() || value > absl::Seconds(10)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--watch-sweep-", name, ": must be in 0s..10s, not ",
                       absl::FormatDuration(value)));
    }
  }
  return absl::OkStatus();
}

HaOptions HaOptionsFromFlags() {
  HaOptions ha;
  ha.etcd.endpoints = absl::GetFlag(FLAGS_etcd_endpoints);
  ha.etcd.user = absl::GetFlag(FLAGS_etcd_user);
  ha.etcd.tls_files = {absl::GetFlag(FLAGS_etcd_ca),
                       absl::GetFlag(FLAGS_etcd_cert),
                       absl::GetFlag(FLAGS_etcd_key)};
  ha.etcd.tls = !ha.etcd.tls_files.ca_file.empty();
  ha.replica_id = absl::GetFlag(FLAGS_replica_id);
  ha.advertise_address = absl::GetFlag(FLAGS_advertise_address);
  if (ha.advertise_address.empty()) {
    ha.advertise_address = absl::GetFlag(FLAGS_listen);
  }
  ha.prefix = absl::GetFlag(FLAGS_etcd_prefix);
  ha.lease_ttl = absl::GetFlag(FLAGS_etcd_lease_ttl);
  ha.snapshot_every_entries = absl::GetFlag(FLAGS_etcd_snapshot_entries);
  ha.snapshot_every_mib = absl::GetFlag(FLAGS_etcd_snapshot_mib);
  ha.max_batch_bytes = absl::GetFlag(FLAGS_etcd_max_batch_bytes);
  return ha;
}

}  // namespace

absl::Status CheckDaemonOptions(const DaemonOptions& options) {
  RETURN_IF_ERROR(CheckTls(options.tls));
  RETURN_IF_ERROR(CheckListenAddresses(options));
  RETURN_IF_ERROR(CheckWatchFlush(options.watch_flush));
  if (options.ha_mode()) RETURN_IF_ERROR(CheckHaOptions(options.ha));
  return absl::OkStatus();
}

absl::StatusOr<DaemonOptions> DaemonOptionsFromFlags() {
  DaemonOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.data_dir = absl::GetFlag(FLAGS_data_dir);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.config_file = absl::GetFlag(FLAGS_config);
  options.fleet_file = absl::GetFlag(FLAGS_fleet);
  options.queues_file = absl::GetFlag(FLAGS_queues);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.insecure = absl::GetFlag(FLAGS_insecure);
  options.auth_file = absl::GetFlag(FLAGS_auth);
  options.tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                 absl::GetFlag(FLAGS_tls_client_ca),
                 absl::GetFlag(FLAGS_tls_reload_interval)};
  options.watch_flush = {absl::GetFlag(FLAGS_watch_sweep_quiet),
                         absl::GetFlag(FLAGS_watch_sweep_interval)};
  options.print_address_file = absl::GetFlag(FLAGS_print_address_file);
  options.check_store = absl::GetFlag(FLAGS_check_store);
  options.ha = HaOptionsFromFlags();
  options.etcd_password_file = absl::GetFlag(FLAGS_etcd_password_file);
  RETURN_IF_ERROR(CheckDaemonOptions(options));
  return options;
}

namespace {

// Lets flags be spelled with dashes (--data-dir) as well as underscores.
void DashesToUnderscores(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--", 2) != 0) continue;
    for (char* c = argv[i] + 2; *c != '\0' && *c != '='; ++c) {
      if (*c == '-') *c = '_';
    }
  }
}

}  // namespace

void ParseDaemonFlags(int argc, char** argv, std::string version) {
  DashesToUnderscores(argc, argv);
  absl::SetProgramUsageMessage(
      "phalanxd --check-store --data-dir DIR | "
      "phalanxd [--listen ADDR] [--data-dir DIR] [--metrics-listen ADDR] "
      "[--config FILE] [--fleet FILE] [--queues FILE] [--auth FILE] "
      "[--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]] "
      "[--etcd-endpoints URL[,URL...] --replica-id ID [--advertise-address "
      "HOST:PORT] [--etcd-prefix /phalanx/NAME] [--etcd-lease-ttl 5s]]");
  absl::FlagsUsageConfig usage;
  usage.version_string = [version = std::move(version)] { return version; };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
}

}  // namespace phalanx::server
