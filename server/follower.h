// Follower: the apply loop of an HA replica that does not lead
// (docs/ha.md). One thread keeps the local store caught up with the
// replicated log: an etcd Watch on PREFIX/log/ is only a wake-up, and every
// wake-up (and every `resync` period, when the stream is renewed) applies
// what is new through EtcdStateStore::CatchUp — the one apply path, the same
// a restart and a promotion use. Each entry CatchUp applies is handed to
// Hooks::on_batch, in log order (a batch split into parts once, when its
// last part is applied), so the replica's read view follows the leader's
// revision by revision; when the store's applied seq moved without
// its entries (a snapshot installed the state wholesale) Hooks::on_reset
// runs instead. Hooks::on_progress reports the applied seq, the last seq
// seen in the log, whether the local state is fresh (a catch-up that
// began at most max_staleness ago succeeded: everything committed before
// that is applied) and whether this replica is caught up (fresh, and read
// the log to within max_lag_entries of the last seq seen: buffered parts
// count as read).
//
// Freshness is kept without traffic: each watch stream lives `resync`
// (well below max_staleness), and every new stream is followed by a
// catch-up. A second thread re-reports the progress every max_staleness/5,
// so a follower cut off from etcd — its thread blocked in a call — reports
// itself stale within max_staleness + max_staleness/5 of its last
// successful catch-up.
//
// Owns its threads; Start and Stop from one thread. on_batch and on_reset
// run on the follower's thread; on_progress on either thread, never two
// at once. While it runs, the follower is the store's only writer; once
// Stop returns the store is the caller's again.
#ifndef PHALANX_SERVER_FOLLOWER_H_
#define PHALANX_SERVER_FOLLOWER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "core/state_store.h"
#include "storage/etcd/etcd_client.h"
#include "storage/etcd/etcd_state_store.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {

struct FollowerProgress {
  int64_t applied_seq = 0;
  int64_t last_seq = 0;    // the highest log seq seen (applied or announced)
  bool fresh = false;      // a catch-up began within max_staleness
  bool caught_up = false;  // fresh, and within max_lag_entries
};

class Follower {
 public:
  struct Hooks {
    std::function<void(const core::Mutation& mutation)> on_batch;
    std::function<void()> on_reset;
    std::function<void(const FollowerProgress& progress)> on_progress;
  };
  struct Options {
    std::string prefix;  // "/phalanx/NAME"
    // Caught up while at most this many entries behind the last seen.
    int64_t max_lag_entries = 4;
    // Each Watch stream lives this long; then a fresh catch-up and stream.
    absl::Duration resync = absl::Seconds(1);
    // The state is stale once the last successful catch-up began longer
    // ago than this (docs/ha.md: at most half the election's lease TTL).
    absl::Duration max_staleness = absl::Milliseconds(2500);
    // When the last successful catch-up made before the follower (a
    // start-up's) began: freshness counts from it. InfinitePast when there
    // was none: the follower reports itself stale until its own first
    // catch-up succeeds, however long etcd stays out of reach.
    absl::Time fresh_as_of = absl::InfinitePast();
    // Wait after a failed catch-up or watch before trying again.
    absl::Duration retry = absl::Milliseconds(500);
  };

  // `client` and `store` must outlive the follower. Installs the store's
  // apply listener (which stays after Stop, so a promotion's last CatchUp
  // still reaches on_batch; the caller clears it once it leads).
  Follower(storage::etcd::EtcdClient* client,
           storage::etcd::EtcdStateStore* store, Options options, Hooks hooks);
  ~Follower();  // Stop()

  void Start();
  // Ends the watch and joins the thread; idempotent.
  void Stop();

 private:
  void Run();
  // Re-reports the progress every max_staleness/5 until Stop.
  void Watchdog();
  // One catch-up; false when it failed.
  bool CatchUp();
  // Records what a catch-up or a watch event showed: the log's last seq
  // seen (and, after a successful catch-up, the time it began); reports.
  void Saw(int64_t last_seq, absl::Time fresh_as_of = absl::InfinitePast());
  // Reports the progress as of now through Hooks::on_progress.
  void Report();
  bool stopping() const;
  // Waits for `d` or Stop; false once stopping.
  bool Wait(absl::Duration d);

  storage::etcd::EtcdClient* const client_;
  storage::etcd::EtcdStateStore* const store_;
  const Options options_;
  const Hooks hooks_;
  int64_t listened_seq_ = 0;  // follower thread: the last seq on_batch saw
  std::thread thread_;
  std::thread watchdog_;
  mutable Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  storage::etcd::WatchStream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Serializes Report; what it reports from.
  Mutex report_mu_;
  int64_t last_seq_ ABSL_GUARDED_BY(report_mu_) = 0;
  absl::Time fresh_as_of_ ABSL_GUARDED_BY(report_mu_) = absl::InfinitePast();
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_FOLLOWER_H_
