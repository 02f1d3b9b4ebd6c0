// WatchHub: fans committed events out to WatchGangs streams (DESIGN §8).
// Keeps a ring of recent events (converted to proto once); a watcher that
// resumes from an older revision reads pages from the StateStore first.
// Streams get a BOOKMARK with the current revision when idle for the
// bookmark interval, and are ended with RESOURCE_EXHAUSTED when they fall
// more than max_lag_events behind.
//
// Thread-safe. Lock order: a watcher's lock, then the hub's.
#ifndef PHALANX_SERVER_WATCH_HUB_H_
#define PHALANX_SERVER_WATCH_HUB_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/state_store.h"
#include "grpcpp/grpcpp.h"
#include "phalanx/v1/scheduler.pb.h"
#include "server/scheduler_loop.h"

namespace phalanx::server {

// A committed event, converted once, with what filters need.
struct HubEvent {
  int64_t revision = 0;
  std::string queue;
  std::string gang_id;
  std::shared_ptr<const v1::GangEvent> proto;
};

// Converts a core event for the ring.
HubEvent ToHubEvent(const core::Event& event);

class WatchHub : public BatchObserver {
 public:
  WatchHub(core::StateStore* store, int64_t start_revision,
           size_t ring_capacity = 65536);
  ~WatchHub() override;

  // Starts a stream for `request`. Fails the stream with OUT_OF_RANGE when
  // after_revision has been trimmed.
  grpc::ServerWriteReactor<v1::GangEvent>* Watch(
      const v1::WatchGangsRequest& request);
  // Ends every stream with UNAVAILABLE and refuses new ones.
  void Shutdown();
  // Current number of open streams.
  int watchers() const;

  void OnBatch(const core::Mutation& mutation, const core::Scheduler& scheduler,
               absl::Duration cycle, absl::Duration commit,
               int commands) override;

  class Watcher;

 private:
  friend class Watcher;
  // Events after `after` that are in the ring, at most `limit`; sets
  // `in_ring` false when `after` precedes the ring.
  std::vector<HubEvent> ReadRing(int64_t after, int limit, bool& in_ring) const;
  void Remove(Watcher* watcher);
  void TickBookmarks();
  int64_t Revision() const;
  absl::Duration BookmarkInterval() const;
  int64_t MaxLag() const;

  core::StateStore* store_;
  const size_t ring_capacity_;
  mutable absl::Mutex mu_;
  std::deque<HubEvent> ring_ ABSL_GUARDED_BY(mu_);
  int64_t revision_ ABSL_GUARDED_BY(mu_);
  absl::Duration bookmark_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(10);
  int64_t max_lag_ ABSL_GUARDED_BY(mu_) = 100000;
  std::set<std::shared_ptr<Watcher>> watchers_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::thread ticker_;
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_WATCH_HUB_H_
