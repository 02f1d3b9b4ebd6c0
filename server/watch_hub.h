// WatchHub: fans committed events out to WatchGangs streams (docs/design.md
// §8). The scheduler loop hands each durable batch's events to the hub, which
// converts and serializes each event once, appends it to a ring of recent
// events and returns; two fan-out threads then sweep the streams (each owns
// half of them), at most every WatchFlush::interval while events keep
// coming, so events that arrive close together go out in one message (or
// one burst of writes). Streams share the serialized bytes (slices are
// reference counted, never copied). A WatchGangs stream with several events
// queued sends them back to back as buffered writes, flushed by the last; a
// WatchGangBatches stream sends everything queued as ONE message (a
// GangEventBatch framed from the same bytes), so its cost per wake-up, not
// per event, is what grows with the event rate.
// A watcher that resumes from an older revision reads pages from the
// StateStore first. Streams get a BOOKMARK with the current revision when
// idle for the bookmark interval, and are ended with RESOURCE_EXHAUSTED when
// they fall more than max_lag_events behind.
//
// Thread-safe. Lock order: a watcher's lock, then the hub's.
#ifndef PHALANX_SERVER_WATCH_HUB_H_
#define PHALANX_SERVER_WATCH_HUB_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "core/state_store.h"
#include "grpcpp/grpcpp.h"
#include "phalanx/v1/scheduler.pb.h"
#include "server/scheduler_loop.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {

// A committed event, converted and serialized once, with what filters need.
struct HubEvent {
  int64_t revision = 0;
  std::string queue;
  std::string gang_id;
  // The serialized v1::GangEvent behind the tag and length that make it one
  // element of GangEventBatch.events (field 1), in one slice: a batch is
  // these slices back to back.
  grpc::Slice framed;
  grpc::ByteBuffer message;  // the GangEvent alone: a view into `framed`
  int64_t bytes = 0;         // the GangEvent's size
};
using HubEventPtr = std::shared_ptr<const HubEvent>;

// Whether a stream may see events of a queue (authorization); null = all.
using WatchScope = std::function<bool(const std::string& queue)>;

// Who opens a stream, and what it may see.
struct WatchAccess {
  WatchScope scope;
  std::string principal;           // "" = not counted (no --auth)
  std::optional<int> max_streams;  // the principal's own cap, if any
  grpc::CallbackServerContext* context = nullptr;  // to cancel a stall
};

// Converts and serializes a core event for the ring.
HubEventPtr ToHubEvent(const core::Event& event);

// What a stream sends: one GangEvent per message (WatchGangs), or every
// event ready at once as one GangEventBatch (WatchGangBatches).
enum class WatchFormat { kEvents, kBatches };

// A WatchGangBatches message carries at most this many events and, beyond
// its first event, this many bytes (well under the 4 MiB a gRPC client
// accepts by default); the rest follow in the next message.
inline constexpr int kMaxBatchEvents = 1024;
inline constexpr int64_t kMaxBatchBytes = int64_t{1} << 20;

// When the fan-out sweeps the streams (hands them the events that arrived
// since the last sweep): at once for an event that comes `quiet` or more
// after the last sweep (a lone event waits for nothing), else `interval`
// after the last sweep, together with everything that arrived meanwhile.
// So a stream gets at most one message per `interval` while events keep
// coming, and an event waits at most `interval` for its sweep (plus the
// stream's write in flight, if any). docs/watch.md.
struct WatchFlush {
  absl::Duration quiet = absl::Milliseconds(15);
  absl::Duration interval = absl::Milliseconds(25);
};

class WatchHub : public BatchObserver {
 public:
  static constexpr size_t kDefaultRingCapacity = 65536;
  WatchHub(core::StateStore* store, int64_t start_revision,
           size_t ring_capacity = kDefaultRingCapacity, WatchFlush flush = {});
  ~WatchHub() override;

  // Starts a stream for `request` (a serialized v1::WatchGangsRequest)
  // that shows only events `scope` allows. Fails the stream with
  // INVALID_ARGUMENT when it does not parse, and with OUT_OF_RANGE when
  // after_revision has been trimmed.
  // RESOURCE_EXHAUSTED when the principal has its limit of open streams.
  // Each stream queues at most limits.watch_stream_buffer_bytes (one event
  // at least) and all together at most limits.watch_total_buffer_bytes: a
  // stream that cannot get its bytes, or whose client takes no write for
  // a minute, is ended with RESOURCE_EXHAUSTED and resumes from its last
  // revision.
  // `format` says how events are framed; the stream's contract is the same.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Watch(
      const grpc::ByteBuffer& request, WatchAccess access = {},
      WatchFormat format = WatchFormat::kEvents);
  // A stream that ends at once with `status`.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Refuse(
      const grpc::Status& status);
  // Ends every stream with UNAVAILABLE (after a last bookmark) and refuses
  // new ones; stops the fan-out thread. Waits up to `max_wait` for the
  // streams to finish.
  void Shutdown(absl::Duration max_wait = absl::Seconds(2));
  // Ends every open stream with `status`, each after a last bookmark (the
  // revision to resume from); new streams are still served. An HA
  // follower whose state went stale ends its streams this way (docs/ha.md).
  void EndAll(const grpc::Status& status);
  // Current number of open streams.
  int watchers() const;

  // Takes the watch settings and limits of `config` (OnApplied does, from
  // the scheduler's; an HA follower, from the replicated config).
  void Configure(const core::Config& config);

  void OnApplied(const core::Mutation& mutation,
                 const core::Scheduler& scheduler, absl::Duration cycle,
                 int commands) override;
  void OnDurable(const core::Mutation& mutation, absl::Duration commit,
                 int commands) override;

  class Watcher;

 private:
  friend class Watcher;
  // What a watcher needs to refill, read under one lock.
  struct RingRead {
    std::vector<HubEventPtr> events;  // after `after`, at most `limit`
    bool in_ring = true;              // false when `after` precedes the ring
    int64_t head = 0;                 // the newest revision in the ring
    int64_t max_lag = 0;
    int64_t stream_bytes = 0;  // what one stream may queue
  };
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Start(
      const v1::WatchGangsRequest& parsed, WatchAccess access,
      WatchFormat format, grpc::Status refusal);
  // Counts a new stream of access.principal; RESOURCE_EXHAUSTED at its cap.
  grpc::Status CountStream(const WatchAccess& access)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `bytes` from the total buffer budget; false when it is spent.
  bool Reserve(int64_t bytes);
  void Release(int64_t bytes);
  RingRead ReadRing(int64_t after, int limit) const;
  void Remove(Watcher* watcher);
  void FanOut(int shard);
  void TickBookmarks();
  absl::Duration BookmarkInterval() const;
  std::vector<std::shared_ptr<Watcher>> Watchers() const;
  bool NoWatchers() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  core::StateStore* store_;
  const size_t ring_capacity_;
  const WatchFlush flush_;
  mutable Mutex mu_;
  std::deque<HubEventPtr> ring_ ABSL_GUARDED_BY(mu_);
  int64_t revision_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped when the ring grows
  absl::Duration bookmark_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(10);
  int64_t max_lag_ ABSL_GUARDED_BY(mu_) = 100000;
  int64_t ring_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  const int64_t ring_max_bytes_ = int64_t{64} << 20;
  int64_t stream_buffer_bytes_ ABSL_GUARDED_BY(mu_) = int64_t{4} << 20;
  int streams_per_principal_ ABSL_GUARDED_BY(mu_) = 64;
  absl::flat_hash_map<std::string, int> streams_by_principal_
      ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> total_buffer_bytes_{int64_t{256} << 20};
  std::atomic<int64_t> buffered_bytes_{0};
  static constexpr absl::Duration kStallTimeout = absl::Minutes(1);
  std::set<std::shared_ptr<Watcher>> watchers_ ABSL_GUARDED_BY(mu_);
  int next_shard_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // Fan-out threads: one delivers to many streams serially; more than two
  // gain nothing on the 2-core machines this is sized for.
  static constexpr int kFanOutThreads = 2;
  std::vector<std::thread> fan_out_;
  std::thread ticker_;
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_WATCH_HUB_H_
