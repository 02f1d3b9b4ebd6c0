// EtcdElection: the Election port on etcd (docs/ha.md). A candidate holds a
// lease (Options::lease_ttl) and creates PREFIX/leader with it in a
// transaction "create if absent"; the winner's term is that key's create
// revision, so terms only grow. While leading, a thread renews the lease
// every ttl/3 and checks the key is still its own; when the lease is gone,
// the key is someone else's, or no renewal got through before
// `valid_until()`, the replica stops leading (fail-stop) and `on_lost`
// runs once. A loser waits on a Watch of the key for it to be deleted,
// then tries again.
//
// valid_until() is the time before which etcd cannot have expired the
// lease: the send time of the last renewal etcd acknowledged, plus the
// TTL, less a margin (kLeaseMargin of the TTL) for the renewal thread's
// wake-up and for clocks that run at slightly different rates. etcd counts
// the TTL from when it received the renewal, later than it was sent, so the
// replica gives leadership up before any other replica can win it.
//
// The key's value is "REPLICA_ID ADDRESS", what followers report as the
// leader (replica ids have no spaces).
//
// Thread-safe.
#ifndef PHALANX_SERVER_ETCD_ELECTION_H_
#define PHALANX_SERVER_ETCD_ELECTION_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/election.h"
#include "storage/etcd/etcd_client.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {

struct EtcdElectionOptions {
  std::string prefix;      // "/phalanx/NAME", no trailing slash
  std::string replica_id;  // no spaces
  std::string address;     // where this replica serves gRPC
  absl::Duration lease_ttl = absl::Seconds(5);
};

// Who leads, as the election key says.
struct LeaderInfo {
  std::string replica_id;
  std::string address;
  int64_t term = 0;
  int64_t lease = 0;
};

class EtcdElection : public Election {
 public:
  // `client` must outlive the election. `on_lost` runs once, on the
  // renewal thread, when leadership is lost other than by Resign.
  EtcdElection(storage::etcd::EtcdClient* client, EtcdElectionOptions options,
               std::function<void()> on_lost);
  // Stops renewing; the lease then expires (Resign hands over at once).
  ~EtcdElection() override;

  absl::StatusOr<int64_t> Campaign(absl::Time deadline) override;
  bool leading() const override { return leading_.load(); }
  // Stops renewing and revokes the lease, so the key is deleted and the
  // next candidate wins at once. A revoke no member answered (UNAVAILABLE,
  // DEADLINE_EXCEEDED) is retried while the lease surely still holds in
  // etcd (until valid_until()); past that it expires by itself within the
  // safety margin, revoked or not. Returns the last
  // error when no revoke went through.
  absl::Status Resign() override;

  // While leading: until when the lease surely holds in etcd's view (see
  // above); InfinitePast when not leading.
  absl::Time valid_until() const;

  // The term won by the last Campaign; 0 before.
  int64_t term() const { return term_.load(); }
  // The lease this candidate campaigns with; 0 before Campaign.
  int64_t lease() const { return lease_.load(); }
  // The current leader; NotFound when none.
  absl::StatusOr<LeaderInfo> Leader() const;
  std::string LeaderKey() const { return options_.prefix + "/leader"; }

 private:
  // The current leader, asking etcd until `deadline`.
  absl::StatusOr<LeaderInfo> Leader(absl::Time deadline) const;
  // Renews our lease or grants a new one.
  absl::Status EnsureLease();
  // One "create if absent" attempt. Returns the term when won, 0 when
  // another leads; `*seen` is the revision the attempt saw.
  absl::StatusOr<int64_t> TryCreate(int64_t* seen);
  // Blocks until the key is deleted after revision `seen`, or `deadline`.
  absl::Status WaitForVacancy(int64_t seen, absl::Time deadline);
  // The renewal thread's body.
  void Renew();
  // One renewal; returns false once leadership is lost.
  bool RenewOnce();
  // The send time of an acknowledged renewal (or of the winning grant).
  void Renewed(absl::Time sent);
  void StopRenewing();
  // Revokes lease_, retrying until `lease_end` (see Resign).
  absl::Status Revoke(absl::Time lease_end);
  void Lose(const std::string& why);

  storage::etcd::EtcdClient* const client_;
  const EtcdElectionOptions options_;
  const std::function<void()> on_lost_;
  std::atomic<bool> leading_{false};
  std::atomic<int64_t> term_{0};
  std::atomic<int64_t> lease_{0};
  std::thread renewer_;
  mutable Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time valid_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// The part of the lease TTL a leader keeps in hand: it stops leading at
// (last acknowledged renewal sent) + TTL × (1 − kLeaseMargin).
inline constexpr double kLeaseMargin = 0.1;

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_ETCD_ELECTION_H_
