// phalanxd's HA mode on etcd (docs/ha.md).
//
// HaReplica: the etcd client, the
// replica's EtcdStateStore (its local RocksDB, fed by the replicated log)
// and its election. While another replica leads, the daemon follows (a
// Follower applies the log and the replica serves reads) and campaigns
// with WaitToLead; once it leads, the store is fenced by its term and the
// daemon recovers and serves writes. Leadership lost is fail-stop: the
// process exits (code 3) at once, and restarts as a follower.
//
// Thread-compatible: used from the daemon's thread (the renewal thread only
// runs the fail-stop).
//
// MakeHaMode: the Daemon's HA strategy (DaemonMode) around an HaReplica —
// a follower until WaitToLead wins, then promoted like a restart.
#ifndef PHALANX_SERVER_HA_MODE_H_
#define PHALANX_SERVER_HA_MODE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/daemon_mode.h"
#include "server/etcd_election.h"
#include "storage/etcd/etcd_client.h"
#include "storage/etcd/etcd_state_store.h"

namespace phalanx::server {

struct HaOptions {
  storage::etcd::EtcdClientOptions etcd;
  std::string replica_id;
  std::string advertise_address;
  std::string prefix = "/phalanx/default";
  absl::Duration lease_ttl = absl::Seconds(5);
  // The leader's snapshot trigger (docs/ha.md "Snapshots and compaction").
  int64_t snapshot_every_entries = 10000;
  int64_t snapshot_every_mib = 64;
  // The largest log entry; a larger batch is split into parts. At most
  // etcd's --max-request-bytes less room for the transaction (the default
  // fits etcd's default); smaller values are for tests.
  int64_t max_batch_bytes = storage::etcd::kDefaultMaxBatchBytes;
};

// OK when `options` can be served; else InvalidArgument naming the flag at
// fault.
absl::Status CheckHaOptions(const HaOptions& options);

// The exit code of a leader that lost its lease or whose commit the fence
// refused (docs/ha.md): a supervisor restarts it, and it follows.
inline constexpr int kExitDeposed = 3;
// Prints why and exits with kExitDeposed at once (no destructor runs: the
// scheduler's memory may be ahead of what this term may commit).
[[noreturn]] void ExitDeposed(const std::string& why);

// The health service name SERVING on the HA leader only.
inline constexpr char kLeaderHealthService[] = "phalanx.v1.Leader";

class HaReplica {
 public:
  // Checks the options, connects to etcd and opens the local RocksDB in
  // `data_dir`. Fails with InvalidArgument naming the flag at fault.
  static absl::StatusOr<std::unique_ptr<HaReplica>> Open(
      HaOptions options, const std::string& data_dir);

  // Campaigns until this replica leads (OK, the store fenced by the term
  // won), or `stop()` returns true (Cancelled); `stop` is asked at least
  // once per lease TTL. `on_leader(address)` runs after each lost round
  // with the leader's advertised address ("" when unknown).
  absl::Status WaitToLead(
      const std::function<bool()>& stop,
      const std::function<void(const std::string& address)>& on_leader);
  // The leader's advertised address as the election key says now; "" when
  // none leads or etcd cannot say.
  std::string LeaderAddress();
  // Where clients reach this replica; set before WaitToLead when the
  // option named port 0 (the bound port is known once serving).
  void set_advertise_address(std::string address);
  const std::string& advertise_address() const {
    return options_.advertise_address;
  }
  storage::etcd::EtcdClient* client() { return client_.get(); }
  const HaOptions& options() const { return options_; }
  // The store to recover from and commit to; fenced once leading.
  storage::etcd::EtcdStateStore* store() { return store_.get(); }
  int64_t term() const { return election_ ? election_->term() : 0; }
  // Hands leadership over at once (a clean shutdown).
  absl::Status Resign() {
    return election_ ? election_->Resign() : absl::OkStatus();
  }

 private:
  HaReplica() = default;
  EtcdElection& election();

  HaOptions options_;
  std::unique_ptr<storage::etcd::EtcdClient> client_;
  std::unique_ptr<storage::etcd::EtcdStateStore> store_;
  std::unique_ptr<EtcdElection> election_;
};

// The daemon's HA mode: reads the etcd password from `password_file` (if
// any; trailing newlines dropped), then opens an HaReplica. Its loop
// follows — reads served from the replicated view, writes redirected to
// the leader — until Lead wins the election and promotes this replica.
absl::StatusOr<std::unique_ptr<DaemonMode>> MakeHaMode(
    HaOptions options, const std::string& password_file,
    const std::string& data_dir);

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_HA_MODE_H_
