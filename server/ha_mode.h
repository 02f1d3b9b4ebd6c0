// HaReplica: phalanxd's HA mode on etcd (docs/ha.md), as far as it is
// built: active/standby. A replica keeps its local RocksDB caught up with
// the replicated log while it stands by, campaigns, and once it leads hands
// the daemon an EtcdStateStore fenced by its term; the daemon then recovers
// and serves as usual. Leadership lost is fail-stop: the process exits (code
// 3) at once, and restarts as a standby. A standby serves no gRPC yet.
//
// Thread-compatible: used from main's thread (the renewal thread only runs
// the fail-stop).
#ifndef PHALANX_SERVER_HA_MODE_H_
#define PHALANX_SERVER_HA_MODE_H_

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
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
};

class HaReplica {
 public:
  // Checks the options, connects to etcd and opens the local RocksDB in
  // `data_dir`. Fails with InvalidArgument naming the flag at fault.
  static absl::StatusOr<std::unique_ptr<HaReplica>> Open(
      HaOptions options, const std::string& data_dir);

  // Stands by until this replica leads (OK), or one of `signals` arrives
  // (Cancelled). Meanwhile applies the log to the local store.
  absl::Status WaitToLead(const sigset_t& signals);
  // The store to recover from and commit to; fenced once leading.
  storage::etcd::EtcdStateStore* store() { return store_.get(); }
  int64_t term() const { return election_->term(); }
  // Hands leadership over at once (a clean shutdown).
  absl::Status Resign() { return election_->Resign(); }

 private:
  HaReplica() = default;

  HaOptions options_;
  std::unique_ptr<storage::etcd::EtcdClient> client_;
  std::unique_ptr<storage::etcd::EtcdStateStore> store_;
  std::unique_ptr<EtcdElection> election_;
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_HA_MODE_H_
