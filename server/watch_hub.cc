#include "server/watch_hub.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/validate.h"
#include "grpc/slice.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "phalanx/v1/scheduler.pb.h"
#include "proto/convert.h"
#include "server/status.h"
#include "storage/sync/handoff.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {
namespace {

template <typename Message>
grpc::ByteBuffer Serialize(const Message& message) {
  grpc::ByteBuffer buffer;
  bool own = false;
  grpc::SerializationTraits<Message>::Serialize(message, &buffer, &own);
  return buffer;
}

// Writes the wire prefix of a length-delimited field 1 of `length` bytes
// (the tag, then the length as a varint) at `out`; returns its size.
size_t WriteBatchPrefix(uint64_t length, uint8_t* out) {
  size_t n = 0;
  out[n++] = 0x0a;  // field 1, wire type 2
  do {
    uint8_t byte = length & 0x7f;
    length >>= 7;
    if (length != 0) byte |= 0x80;
    out[n++] = byte;
  } while (length != 0);
  return n;
}

}  // namespace

// One WatchGangs stream. Owned by the hub's set from creation until gRPC
// calls OnDone; one write in flight at a time.
class WatchHub::Watcher : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  Watcher(WatchHub* hub, const v1::WatchGangsRequest& request, int64_t next,
          int shard, WatchAccess access, WatchFormat format)
      : hub_(hub),
        shard_(shard),
        batches_(format == WatchFormat::kBatches),
        scope_(std::move(access.scope)),
        principal_(std::move(access.principal)),
        context_(access.context),
        queues_(request.queues().begin(), request.queues().end()),
        gang_ids_(request.gang_ids().begin(), request.gang_ids().end()),
        next_(next),
        last_write_(absl::Now()) {
    // The handler returns this reactor to gRPC, which then runs its
    // reactions on its own threads, ordered inside libgrpc
    // (storage/sync/handoff.h).
    HandoffRelease(this);
  }

  ~Watcher() override { hub_->Release(reserved_); }

  // The fan-out thread that wakes this stream.
  int shard() const { return shard_; }
  // Whose stream it is ("" without --auth).
  const std::string& principal() const { return principal_; }

  // Ends a stream whose client has not taken a write for `stall`: what it
  // holds is bounded, but it must not hold it for ever.
  void EndIfStalled(absl::Duration stall) {
    MutexLock lock(&mu_);
    if (!writing_ || finished_ || absl::Now() - last_write_ < stall) return;
    pending_status_ =
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat("watch stream stalled (no write taken for ",
                                  absl::FormatDuration(stall),
                                  "); resume from the last revision received"));
    if (context_ != nullptr) context_->TryCancel();
  }

  // Writes the next matching event (or a due bookmark) unless a write is in
  // flight. Called whenever something new may be available.
  void Pump() {
    MutexLock lock(&mu_);
    PumpLocked();
  }

  // A fan-out sweep: Pump, and when a write is in flight, remember to look
  // for new events once it completes (until then the stream does not chase
  // events the ring gains between sweeps, so they coalesce).
  void Sweep() {
    MutexLock lock(&mu_);
    if (writing_) {
      look_again_ = true;
      return;
    }
    PumpLocked();
  }

  void RequestBookmark() {
    MutexLock lock(&mu_);
    if (absl::Now() - last_write_ >= hub_->BookmarkInterval()) {
      bookmark_due_ = true;
    }
    PumpLocked();
  }

  void End(const grpc::Status& status) {
    MutexLock lock(&mu_);
    EndLocked(status);
  }

  // Ends the stream after a last BOOKMARK, so the client knows where to
  // resume. Finish then runs from OnWriteDone, on a gRPC thread: a Finish
  // called from the shutting-down thread made Server::Shutdown wait for its
  // whole deadline.
  void EndWithBookmark(const grpc::Status& status) {
    MutexLock lock(&mu_);
    if (finished_) return;
    pending_status_ = status;
    bookmark_before_end_ = true;
    PumpLocked();  // now, or when the write in flight completes
  }

  // Each reaction acquires what the handler and the earlier reactions
  // released, and releases for OnDone, which gRPC runs after every other
  // reaction has returned.
  void OnWriteDone(bool ok) override {
    HandoffScope handoff(this);
    MutexLock lock(&mu_);
    writing_ = false;
    hub_->Release(in_flight_bytes_);
    reserved_ -= in_flight_bytes_;
    in_flight_bytes_ = 0;
    if (!ok) {
      EndLocked(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
      return;
    }
    // Carry on with what is queued, a catch-up, events the ring already
    // held past the last page read or a sweep this stream missed, a due
    // bookmark or an end; a live stream otherwise waits for the next sweep,
    // so events arriving meanwhile go out together.
    if (!backlog_.empty() || !caught_up_ || look_again_ || bookmark_due_ ||
        pending_status_) {
      PumpLocked();
    }
  }

  void OnCancel() override {
    HandoffScope handoff(this);
    End(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void OnDone() override {
    HandoffAcquire(this);
    hub_->Remove(this);
  }

 private:
  // Whether the stream shows `event`. `scoped` remembers the scope's answer
  // for the last queue asked about: one page of events is checked against
  // one queue tree, and a busy queue's events ask once per page, not once
  // per event (each answer reads the published view).
  struct ScopeMemo {
    const std::string* queue = nullptr;
    bool allowed = false;
  };
  bool Matches(const HubEvent& event, ScopeMemo& scoped) const {
    if (!queues_.empty() && !queues_.contains(event.queue)) return false;
    if (!gang_ids_.empty() && !gang_ids_.contains(event.gang_id)) return false;
    if (!scope_) return true;
    if (scoped.queue == nullptr || *scoped.queue != event.queue) {
      scoped.queue = &event.queue;
      scoped.allowed = scope_(event.queue);
    }
    return scoped.allowed;
  }

  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (pending_status_) {
      if (bookmark_before_end_) {  // where to resume, then the status
        bookmark_before_end_ = false;
        WriteBookmark();
        return;
      }
      EndLocked(*pending_status_);
      return;
    }
    while (backlog_.empty()) {
      if (!Refill()) return;
    }
    if (batches_) {
      WriteBatch();
      return;
    }
    HubEventPtr event = std::move(backlog_.front());
    backlog_.pop_front();
    backlog_bytes_ -= event->bytes;
    in_flight_bytes_ = event->bytes;
    // More queued: let gRPC buffer this one; the next write flushes both.
    Write(event->message, /*more=*/!backlog_.empty());
  }

  // Loads the next events after next_-1 into the backlog. Returns false when
  // there is nothing to send now (after writing a due bookmark, if any).
  bool Refill() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    constexpr int kPage = 256;
    // Whatever a missed sweep announced is read now.
    look_again_ = false;
    RingRead read = hub_->ReadRing(next_ - 1, kPage);
    if (caught_up_ && read.head - next_ + 1 > read.max_lag) {
      EndLocked(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("watcher fell more than ", read.max_lag,
                       " events behind; resume from revision ", next_ - 1)));
      return false;
    }
    if (!read.in_ring) {
      read.events = ReadStore(next_ - 1, kPage, read.stream_bytes);
    }
    if (finished_) return false;
    if (read.events.empty()) {
      caught_up_ = true;
      if (bookmark_due_) WriteBookmark();
      return false;
    }
    // What this page adds, bounded in bytes per stream (one event at
    // least); reserved from the total for all streams at once.
    ScopeMemo scoped;
    int64_t bytes = 0;
    int64_t next = next_;
    std::vector<HubEventPtr> taken;
    taken.reserve(read.events.size());
    for (HubEventPtr& event : read.events) {
      const int64_t revision = event->revision;
      if (Matches(*event, scoped)) {
        if ((!backlog_.empty() || !taken.empty()) &&
            backlog_bytes_ + bytes + event->bytes > read.stream_bytes) {
          break;
        }
        bytes += event->bytes;
        taken.push_back(std::move(event));
      }
      next = revision + 1;
    }
    if (bytes > 0 && !hub_->Reserve(bytes)) {
      EndLocked(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("the server's watch buffers are full; resume from "
                       "revision ",
                       next_ - 1)));
      return false;
    }
    reserved_ += bytes;
    backlog_bytes_ += bytes;
    next_ = next;
    // The page (or the byte bound) stopped short of the head: the rest goes
    // out after this write, not at the next sweep.
    look_again_ = next_ <= read.head;
    for (HubEventPtr& event : taken) backlog_.push_back(std::move(event));
    return true;
  }

  std::vector<HubEventPtr> ReadStore(int64_t after, int limit,
                                     int64_t max_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto events =
        hub_->store_->ReadEvents(after, limit, static_cast<size_t>(max_bytes));
    if (!events.ok()) {
      EndLocked(ToGrpc(events.status()));
      return {};
    }
    std::vector<HubEventPtr> out;
    for (const core::Event& event : *events) out.push_back(ToHubEvent(event));
    return out;
  }

  // Sends the queued events, oldest first, as one GangEventBatch (bounded
  // by kMaxBatchEvents and kMaxBatchBytes): each event's framed slice, a
  // reference to bytes shared by every stream; nothing is copied or
  // serialized again.
  void WriteBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<grpc::Slice> slices;
    slices.reserve(std::min<size_t>(backlog_.size(), kMaxBatchEvents));
    int64_t bytes = 0;
    int events = 0;
    while (!backlog_.empty() && events < kMaxBatchEvents &&
           (events == 0 || bytes + backlog_.front()->bytes <= kMaxBatchBytes)) {
      HubEventPtr event = std::move(backlog_.front());
      backlog_.pop_front();
      slices.push_back(event->framed);
      bytes += event->bytes;
      ++events;
    }
    backlog_bytes_ -= bytes;
    in_flight_bytes_ = bytes;
    Write(grpc::ByteBuffer(slices.data(), slices.size()),
          /*more=*/!backlog_.empty());
  }

  // A bookmark promises that every matching event up to its revision has
  // been sent: the last revision looked at, less what is still queued.
  void WriteBookmark() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    bookmark_due_ = false;
    v1::GangEvent bookmark;
    bookmark.set_revision(backlog_.empty() ? next_ - 1
                                           : backlog_.front()->revision - 1);
    bookmark.set_type(v1::EVENT_TYPE_BOOKMARK);
    convert::ToProto(absl::Now(), bookmark.mutable_time());
    if (batches_) {
      v1::GangEventBatch batch;
      *batch.add_events() = std::move(bookmark);
      Write(Serialize(batch), /*more=*/false);
      return;
    }
    Write(Serialize(bookmark), /*more=*/false);
  }

  void Write(const grpc::ByteBuffer& message, bool more)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    writing_ = true;
    last_write_ = absl::Now();
    current_ = message;  // shares the slices; kept until OnWriteDone
    grpc::WriteOptions options;
    // Never on the first write: it carries the initial metadata, which gRPC
    // then holds back too, and its completion with it, until some other
    // write on the connection happens to flush them.
    if (more && wrote_once_) options.set_buffer_hint();
    wrote_once_ = true;
    StartWrite(&current_, options);
  }

  void EndLocked(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    if (writing_) {  // finish once the write in flight completes
      pending_status_ = status;
      return;
    }
    finished_ = true;
    Finish(status);
  }

  WatchHub* const hub_;
  const int shard_;
  const bool batches_;      // WatchFormat::kBatches
  const WatchScope scope_;  // null: every queue
  const std::string principal_;
  grpc::CallbackServerContext* const context_;  // may be null
  const std::set<std::string> queues_;
  const std::set<std::string> gang_ids_;
  Mutex mu_;
  int64_t next_ ABSL_GUARDED_BY(mu_);  // next revision to look at
  std::deque<HubEventPtr> backlog_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer current_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool wrote_once_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool bookmark_due_ ABSL_GUARDED_BY(mu_) = false;
  bool caught_up_ ABSL_GUARDED_BY(mu_) = false;  // has been live once
  // Look for new events when the write in flight completes: a sweep found
  // it writing, or the last read stopped short of the ring's head.
  bool look_again_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> pending_status_ ABSL_GUARDED_BY(mu_);
  // Set by EndWithBookmark: a last bookmark goes out before the status.
  bool bookmark_before_end_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_write_ ABSL_GUARDED_BY(mu_);
  // Bytes of events queued here and of the write in flight, all reserved
  // from the hub's total.
  int64_t backlog_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
};

HubEventPtr ToHubEvent(const core::Event& event) {
  v1::GangEvent proto;
  convert::ToProto(event, &proto);
  auto out = std::make_shared<HubEvent>();
  out->revision = event.revision;
  const size_t size = proto.ByteSizeLong();
  uint8_t prefix[11];
  const size_t prefix_size = WriteBatchPrefix(size, prefix);
  grpc_slice framed = grpc_slice_malloc(prefix_size + size);
  uint8_t* start = GRPC_SLICE_START_PTR(framed);
  std::memcpy(start, prefix, prefix_size);
  proto.SerializeWithCachedSizesToArray(start + prefix_size);
  out->framed = grpc::Slice(framed, grpc::Slice::STEAL_REF);
  grpc::Slice body = out->framed.sub(prefix_size, prefix_size + size);
  out->message = grpc::ByteBuffer(&body, 1);
  out->bytes = static_cast<int64_t>(size);
  if (event.gang) {
    out->queue = event.gang->spec.queue.value();
    out->gang_id = event.gang->id.value();
  }
  return out;
}

WatchHub::WatchHub(core::StateStore* store, int64_t start_revision,
                   size_t ring_capacity, WatchFlush flush)
    : store_(store),
      ring_capacity_(ring_capacity),
      flush_(flush),
      revision_(start_revision) {
  for (int shard = 0; shard < kFanOutThreads; ++shard) {
    fan_out_.emplace_back([this, shard] {
      pthread_setname_np(pthread_self(), "phalanx-fanout");
      FanOut(shard);
    });
  }
  ticker_ = std::thread([this] { TickBookmarks(); });
}

WatchHub::~WatchHub() {
  Shutdown();
  for (std::thread& thread : fan_out_) thread.join();
  if (ticker_.joinable()) ticker_.join();
}

absl::Duration WatchHub::BookmarkInterval() const {
  MutexLock lock(&mu_);
  return bookmark_interval_;
}

int WatchHub::watchers() const {
  MutexLock lock(&mu_);
  return static_cast<int>(watchers_.size());
}

std::vector<std::shared_ptr<WatchHub::Watcher>> WatchHub::Watchers() const {
  MutexLock lock(&mu_);
  return {watchers_.begin(), watchers_.end()};
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchHub::Refuse(
    const grpc::Status& status) {
  return Start(v1::WatchGangsRequest(), WatchAccess{}, WatchFormat::kEvents,
               status);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchHub::Watch(
    const grpc::ByteBuffer& request, WatchAccess access, WatchFormat format) {
  v1::WatchGangsRequest parsed;
  grpc::ByteBuffer copy = request;  // Deserialize consumes its buffer
  grpc::Status refusal =
      grpc::SerializationTraits<v1::WatchGangsRequest>::Deserialize(&copy,
                                                                    &parsed);
  if (!refusal.ok()) {
    refusal = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                           "request: not a WatchGangsRequest");
  }
  return Start(parsed, std::move(access), format, refusal);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchHub::Start(
    const v1::WatchGangsRequest& parsed, WatchAccess access, WatchFormat format,
    grpc::Status refusal) {
  std::shared_ptr<Watcher> watcher;
  {
    MutexLock lock(&mu_);
    int64_t next = revision_ + 1;
    if (parsed.has_after_revision()) next = parsed.after_revision() + 1;
    if (!refusal.ok()) {
    } else if (shutdown_) {
      refusal = grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
    } else if (parsed.has_after_revision() && parsed.after_revision() < 0) {
      refusal = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                             "after_revision: must be >= 0");
    } else if (!access.principal.empty()) {
      refusal = CountStream(access);
    }
    if (!refusal.ok()) access.principal.clear();  // counted only if open
    watcher = std::make_shared<Watcher>(this, parsed, next,
                                        next_shard_++ % kFanOutThreads,
                                        std::move(access), format);
    watchers_.insert(watcher);
  }
  if (!refusal.ok()) {
    watcher->End(refusal);
    return watcher.get();
  }
  if (parsed.has_after_revision()) {
    // Trimmed history cannot be replayed: the client must list again.
    auto probe = store_->ReadEvents(parsed.after_revision(), 0);
    if (!probe.ok()) {
      watcher->End(ToGrpc(probe.status()));
      return watcher.get();
    }
  }
  watcher->Pump();
  return watcher.get();
}

grpc::Status WatchHub::CountStream(const WatchAccess& access) {
  const int limit = access.max_streams.value_or(streams_per_principal_);
  int& open = streams_by_principal_[access.principal];
  if (open >= limit) {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("principal ", core::QuoteForError(access.principal),
                     " has ", open, " open watch streams (limit ", limit,
                     "); close one first"));
  }
  ++open;
  return grpc::Status::OK;
}

void WatchHub::Remove(Watcher* watcher) {
  MutexLock lock(&mu_);
  if (!watcher->principal().empty()) {
    auto count = streams_by_principal_.find(watcher->principal());
    if (count != streams_by_principal_.end() && --count->second <= 0) {
      streams_by_principal_.erase(count);
    }
  }
  for (auto it = watchers_.begin(); it != watchers_.end(); ++it) {
    if (it->get() == watcher) {
      watchers_.erase(it);
      return;
    }
  }
}

bool WatchHub::Reserve(int64_t bytes) {
  int64_t current = buffered_bytes_.load();
  while (true) {
    if (current + bytes > total_buffer_bytes_.load()) return false;
    if (buffered_bytes_.compare_exchange_weak(current, current + bytes)) {
      return true;
    }
  }
}

void WatchHub::Release(int64_t bytes) { buffered_bytes_.fetch_sub(bytes); }

WatchHub::RingRead WatchHub::ReadRing(int64_t after, int limit) const {
  MutexLock lock(&mu_);
  RingRead out;
  out.head = revision_;
  out.max_lag = max_lag_;
  out.stream_bytes = stream_buffer_bytes_;
  const int64_t first = ring_.empty() ? revision_ + 1 : ring_.front()->revision;
  out.in_ring = after + 1 >= first;
  if (!out.in_ring) return out;
  for (size_t i = after + 1 - first;
       i < ring_.size() && static_cast<int>(out.events.size()) < limit; ++i) {
    out.events.push_back(ring_[i]);
  }
  return out;
}

void WatchHub::OnApplied(const core::Mutation&,
                         const core::Scheduler& scheduler, absl::Duration,
                         int) {
  Configure(scheduler.config());
}

void WatchHub::Configure(const core::Config& config) {
  MutexLock lock(&mu_);
  bookmark_interval_ = config.watch.bookmark_interval;
  max_lag_ = config.watch.max_lag_events;
  stream_buffer_bytes_ = config.limits.watch_stream_buffer_bytes;
  total_buffer_bytes_ = config.limits.watch_total_buffer_bytes;
  streams_per_principal_ = config.limits.watch_streams_per_principal;
}

void WatchHub::OnDurable(const core::Mutation& mutation, absl::Duration, int) {
  if (mutation.events.empty()) return;
  {
    // With no stream open nobody needs the ring: drop it rather than
    // convert and serialize every event of every batch. A stream that opens
    // later starts after revision_, and one resuming from an older revision
    // reads the store (the ring starts after revision_ again).
    MutexLock lock(&mu_);
    if (watchers_.empty()) {
      ring_.clear();
      ring_bytes_ = 0;
      revision_ = mutation.events.back().revision;
      return;
    }
  }
  std::vector<HubEventPtr> converted;
  converted.reserve(mutation.events.size());
  for (const core::Event& event : mutation.events) {
    converted.push_back(ToHubEvent(event));
  }
  MutexLock lock(&mu_);
  for (const HubEventPtr& event : converted) ring_bytes_ += event->bytes;
  ring_.insert(ring_.end(), converted.begin(), converted.end());
  // Bounded in events and in bytes; older events are read from the store.
  while (ring_.size() > ring_capacity_ ||
         (ring_.size() > 1 && ring_bytes_ > ring_max_bytes_)) {
    ring_bytes_ -= ring_.front()->bytes;
    ring_.pop_front();
  }
  revision_ = converted.back()->revision;
  // With no stream there is nobody to wake (a new stream reads the ring).
  if (!watchers_.empty()) ++generation_;
}

// A fan-out thread: sweeps the streams of its shard when the ring grows. An
// event that comes flush_.quiet or more after the last sweep is swept at
// once; one that comes sooner waits for the sweep flush_.interval after the
// last, with whatever else arrives meanwhile (one message per stream and
// sweep). Streams that were writing during a sweep look for new events when
// their write completes.
void WatchHub::FanOut(int shard) {
  int64_t seen = 0;
  absl::Time last_sweep = absl::InfinitePast();
  auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return shutdown_; };
  while (true) {
    std::vector<std::shared_ptr<Watcher>> watchers;
    {
      MutexLock lock(&mu_);
      auto ready = [this, &seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return generation_ != seen || shutdown_;
      };
      mu_.Await(absl::Condition(&ready));
      const absl::Duration since = absl::Now() - last_sweep;
      if (since < flush_.quiet && since < flush_.interval) {
        mu_.AwaitWithTimeout(absl::Condition(&stop), flush_.interval - since);
      }
      if (shutdown_) return;
      seen = generation_;
      for (const auto& watcher : watchers_) {
        if (watcher->shard() == shard) watchers.push_back(watcher);
      }
    }
    last_sweep = absl::Now();
    for (const auto& watcher : watchers) watcher->Sweep();
  }
}

void WatchHub::TickBookmarks() {
  while (true) {
    {
      MutexLock lock(&mu_);
      // Tick at a tenth of the interval so idle streams hear from us on
      // time; a new interval (UpdateConfig) restarts the wait by it.
      const absl::Duration interval = bookmark_interval_;
      auto woken = [this, interval]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return shutdown_ || bookmark_interval_ != interval;
      };
      if (mu_.AwaitWithTimeout(absl::Condition(&woken), interval / 10)) {
        if (shutdown_) return;
        continue;
      }
    }
    for (const auto& watcher : Watchers()) {
      watcher->EndIfStalled(kStallTimeout);
      watcher->RequestBookmark();
    }
  }
}

void WatchHub::Shutdown(absl::Duration max_wait) {
  {
    MutexLock lock(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
  }
  EndAll(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "server shutting down; resume from your last revision"));
  // Let the streams send their last bookmark and finish before the server's
  // shutdown deadline can cut them off (bounded: a stream whose client
  // stopped reading may never drain).
  MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(this, &WatchHub::NoWatchers), max_wait);
}

void WatchHub::EndAll(const grpc::Status& status) {
  for (const auto& watcher : Watchers()) watcher->EndWithBookmark(status);
}

bool WatchHub::NoWatchers() const { return watchers_.empty(); }

}  // namespace phalanx::server
