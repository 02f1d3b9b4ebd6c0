#include "server/watch_hub.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/convert.h"
#include "server/status.h"

namespace phalanx::server {

// One WatchGangs stream. Owned by the hub's set from creation until gRPC
// calls OnDone; writes one event at a time.
class WatchHub::Watcher : public grpc::ServerWriteReactor<v1::GangEvent> {
 public:
  Watcher(WatchHub* hub, const v1::WatchGangsRequest& request, int64_t next)
      : hub_(hub),
        queues_(request.queues().begin(), request.queues().end()),
        gang_ids_(request.gang_ids().begin(), request.gang_ids().end()),
        next_(next),
        last_write_(absl::Now()) {}

  // Writes the next matching event (or a due bookmark) unless a write is in
  // flight. Called whenever something new may be available.
  void Pump() {
    absl::MutexLock lock(&mu_);
    PumpLocked();
  }

  void RequestBookmark() {
    absl::MutexLock lock(&mu_);
    if (absl::Now() - last_write_ >= hub_->BookmarkInterval()) {
      bookmark_due_ = true;
    }
    PumpLocked();
  }

  void End(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    EndLocked(status);
  }

  // Ends the stream after a last BOOKMARK, so the client knows where to
  // resume. Finish then runs from OnWriteDone, on a gRPC thread: a Finish
  // called from the shutting-down thread made Server::Shutdown wait for its
  // whole deadline.
  void EndWithBookmark(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    pending_status_ = status;
    if (!writing_) WriteBookmark();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      EndLocked(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
      return;
    }
    PumpLocked();
  }

  void OnCancel() override {
    End(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void OnDone() override { hub_->Remove(this); }

 private:
  bool Matches(const HubEvent& event) const {
    return (queues_.empty() || queues_.contains(event.queue)) &&
           (gang_ids_.empty() || gang_ids_.contains(event.gang_id));
  }

  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (pending_status_) {
      EndLocked(*pending_status_);
      return;
    }
    while (backlog_.empty()) {
      if (!Refill()) return;
    }
    if (!backlog_.empty()) {
      current_ = backlog_.front().proto;
      backlog_.pop_front();
      Write();
      return;
    }
  }

  // Loads the next events after next_-1 into the backlog. Returns false when
  // there is nothing to send now (after writing a due bookmark, if any).
  bool Refill() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    constexpr int kPage = 256;
    bool in_ring = true;
    std::vector<HubEvent> events = hub_->ReadRing(next_ - 1, kPage, in_ring);
    const int64_t head = hub_->Revision();
    if (caught_up_ && head - next_ + 1 > hub_->MaxLag()) {
      EndLocked(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("watcher fell more than ", hub_->MaxLag(),
                       " events behind; resume from revision ", next_ - 1)));
      return false;
    }
    if (!in_ring) events = ReadStore(next_ - 1, kPage);
    if (finished_) return false;
    if (events.empty()) {
      caught_up_ = true;
      if (bookmark_due_) WriteBookmark();
      return false;
    }
    for (HubEvent& event : events) {
      next_ = event.revision + 1;
      if (Matches(event)) backlog_.push_back(std::move(event));
    }
    return true;
  }

  std::vector<HubEvent> ReadStore(int64_t after, int limit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto events = hub_->store_->ReadEvents(after, limit);
    if (!events.ok()) {
      EndLocked(ToGrpc(events.status()));
      return {};
    }
    std::vector<HubEvent> out;
    for (const core::Event& event : *events) out.push_back(ToHubEvent(event));
    return out;
  }

  // A bookmark promises that every matching event up to its revision has
  // been sent: the last revision looked at, less what is still queued.
  void WriteBookmark() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    bookmark_due_ = false;
    auto bookmark = std::make_shared<v1::GangEvent>();
    bookmark->set_revision(backlog_.empty() ? next_ - 1
                                            : backlog_.front().revision - 1);
    bookmark->set_type(v1::EVENT_TYPE_BOOKMARK);
    convert::ToProto(absl::Now(), bookmark->mutable_time());
    current_ = std::move(bookmark);
    Write();
  }

  void Write() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    writing_ = true;
    last_write_ = absl::Now();
    StartWrite(current_.get());
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
  const std::set<std::string> queues_;
  const std::set<std::string> gang_ids_;
  absl::Mutex mu_;
  int64_t next_ ABSL_GUARDED_BY(mu_);  // next revision to look at
  std::deque<HubEvent> backlog_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const v1::GangEvent> current_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool bookmark_due_ ABSL_GUARDED_BY(mu_) = false;
  bool caught_up_ ABSL_GUARDED_BY(mu_) = false;  // has been live once
  std::optional<grpc::Status> pending_status_ ABSL_GUARDED_BY(mu_);
  absl::Time last_write_ ABSL_GUARDED_BY(mu_);
};

HubEvent ToHubEvent(const core::Event& event) {
  auto proto = std::make_shared<v1::GangEvent>();
  convert::ToProto(event, proto.get());
  HubEvent out{event.revision, "", "", std::move(proto)};
  if (event.gang) {
    out.queue = event.gang->spec.queue.value();
    out.gang_id = event.gang->id.value();
  }
  return out;
}

WatchHub::WatchHub(core::StateStore* store, int64_t start_revision,
                   size_t ring_capacity)
    : store_(store), ring_capacity_(ring_capacity), revision_(start_revision) {
  ticker_ = std::thread([this] { TickBookmarks(); });
}

WatchHub::~WatchHub() {
  Shutdown();
  if (ticker_.joinable()) ticker_.join();
}

int64_t WatchHub::Revision() const {
  absl::MutexLock lock(&mu_);
  return revision_;
}

absl::Duration WatchHub::BookmarkInterval() const {
  absl::MutexLock lock(&mu_);
  return bookmark_interval_;
}

int64_t WatchHub::MaxLag() const {
  absl::MutexLock lock(&mu_);
  return max_lag_;
}

int WatchHub::watchers() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(watchers_.size());
}

grpc::ServerWriteReactor<v1::GangEvent>* WatchHub::Watch(
    const v1::WatchGangsRequest& request) {
  std::shared_ptr<Watcher> watcher;
  grpc::Status refusal;
  {
    absl::MutexLock lock(&mu_);
    int64_t next = revision_ + 1;
    if (request.has_after_revision()) next = request.after_revision() + 1;
    if (shutdown_) {
      refusal = grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
    } else if (request.has_after_revision() && request.after_revision() < 0) {
      refusal = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                             "after_revision: must be >= 0");
    }
    watcher = std::make_shared<Watcher>(this, request, next);
    watchers_.insert(watcher);
  }
  if (!refusal.ok()) {
    watcher->End(refusal);
    return watcher.get();
  }
  if (request.has_after_revision()) {
    // Trimmed history cannot be replayed: the client must list again.
    auto probe = store_->ReadEvents(request.after_revision(), 0);
    if (!probe.ok()) {
      watcher->End(ToGrpc(probe.status()));
      return watcher.get();
    }
  }
  watcher->Pump();
  return watcher.get();
}

void WatchHub::Remove(Watcher* watcher) {
  absl::MutexLock lock(&mu_);
  for (auto it = watchers_.begin(); it != watchers_.end(); ++it) {
    if (it->get() == watcher) {
      watchers_.erase(it);
      return;
    }
  }
}

std::vector<HubEvent> WatchHub::ReadRing(int64_t after, int limit,
                                         bool& in_ring) const {
  absl::MutexLock lock(&mu_);
  std::vector<HubEvent> out;
  const int64_t first = ring_.empty() ? revision_ + 1 : ring_.front().revision;
  in_ring = after + 1 >= first;
  if (!in_ring) return out;
  for (size_t i = after + 1 - first;
       i < ring_.size() && static_cast<int>(out.size()) < limit; ++i) {
    out.push_back(ring_[i]);
  }
  return out;
}

void WatchHub::OnBatch(const core::Mutation& mutation,
                       const core::Scheduler& scheduler, absl::Duration,
                       absl::Duration, int) {
  std::vector<std::shared_ptr<Watcher>> watchers;
  {
    absl::MutexLock lock(&mu_);
    bookmark_interval_ = scheduler.config().watch.bookmark_interval;
    max_lag_ = scheduler.config().watch.max_lag_events;
    if (mutation.events.empty()) return;
    for (const core::Event& event : mutation.events) {
      ring_.push_back(ToHubEvent(event));
    }
    while (ring_.size() > ring_capacity_) ring_.pop_front();
    revision_ = mutation.meta.last_revision;
    watchers.assign(watchers_.begin(), watchers_.end());
  }
  for (const auto& watcher : watchers) watcher->Pump();
}

void WatchHub::TickBookmarks() {
  while (true) {
    std::vector<std::shared_ptr<Watcher>> watchers;
    {
      absl::MutexLock lock(&mu_);
      auto stop = [this]()
                      ABSL_SHARED_LOCKS_REQUIRED(mu_) { return shutdown_; };
      // Tick at a tenth of the interval so idle streams hear from us on time.
      if (mu_.AwaitWithTimeout(absl::Condition(&stop),
                               bookmark_interval_ / 10)) {
        return;
      }
      watchers.assign(watchers_.begin(), watchers_.end());
    }
    for (const auto& watcher : watchers) watcher->RequestBookmark();
  }
}

void WatchHub::Shutdown() {
  std::vector<std::shared_ptr<Watcher>> watchers;
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
    watchers.assign(watchers_.begin(), watchers_.end());
  }
  for (const auto& watcher : watchers) {
    watcher->EndWithBookmark(
        grpc::Status(grpc::StatusCode::UNAVAILABLE,
                     "server shutting down; resume from your last revision"));
  }
}

}  // namespace phalanx::server
