#include "server/follower.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {
namespace {

// The seq of a log key "PREFIX/log/<20 digits>"; 0 when it is not one.
int64_t SeqOfKey(const std::string& key) {
  const size_t slash = key.rfind('/');
  int64_t seq = 0;
  if (slash == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(key).substr(slash + 1), &seq)) {
    return 0;
  }
  return seq;
}

}  // namespace

Follower::Follower(storage::etcd::EtcdClient* client,
                   storage::etcd::EtcdStateStore* store, Options options,
                   Hooks hooks)
    : client_(client),
      store_(store),
      options_(std::move(options)),
      hooks_(std::move(hooks)) {
  listened_seq_ = store_->applied_seq();
  store_->set_apply_listener(
      [this](const core::Mutation& mutation, int64_t seq, int64_t after) {
        // `after` skips the orphan parts of an unfinished batch, if any:
        // nothing of theirs was applied.
        if (after == listened_seq_ && hooks_.on_batch) {
          hooks_.on_batch(mutation);
        } else if (hooks_.on_reset) {
          hooks_.on_reset();  // entries skipped: rebuild from the store
        }
        listened_seq_ = seq;
      });
}

Follower::~Follower() { Stop(); }

void Follower::Start() {
  {
    MutexLock lock(&report_mu_);
    last_seq_ = store_->applied_seq();
    fresh_as_of_ = options_.fresh_as_of;
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "phalanx-follow");
    Run();
  });
  watchdog_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "phalanx-stale");
    Watchdog();
  });
}

void Follower::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    if (stream_ != nullptr) stream_->Cancel();
  }
  if (thread_.joinable()) thread_.join();
  if (watchdog_.joinable()) watchdog_.join();
}

bool Follower::stopping() const {
  MutexLock lock(&mu_);
  return stop_;
}

bool Follower::Wait(absl::Duration d) {
  MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stop_), d);
  return !stop_;
}

void Follower::Watchdog() {
  while (Wait(options_.max_staleness / 5)) Report();
}

void Follower::Saw(int64_t last_seq, absl::Time fresh_as_of) {
  {
    MutexLock lock(&report_mu_);
    last_seq_ = std::max(last_seq_, last_seq);
    fresh_as_of_ = std::max(fresh_as_of_, fresh_as_of);
  }
  Report();
}

void Follower::Report() {
  MutexLock lock(&report_mu_);
  if (!hooks_.on_progress) return;
  FollowerProgress progress;
  progress.applied_seq = store_->applied_seq();
  // Read, not applied: the trailing parts of a batch in progress, or
  // orphans no batch will complete, are not a lag.
  const int64_t read_seq = store_->read_seq();
  progress.last_seq = std::max(last_seq_, read_seq);
  progress.fresh = absl::Now() - fresh_as_of_ <= options_.max_staleness;
  progress.caught_up = progress.fresh &&
                       progress.last_seq - read_seq <= options_.max_lag_entries;
  hooks_.on_progress(progress);
}

bool Follower::CatchUp() {
  // CatchUp's reads are linearizable: once it succeeds, every entry
  // committed before it began is applied.
  const absl::Time began = absl::Now();
  absl::StatusOr<int64_t> applied = store_->CatchUp();
  if (!applied.ok()) {
    std::fprintf(stderr, "phalanxd: follower: catching up: %s\n",
                 applied.status().ToString().c_str());
    Report();
    return false;
  }
  // The store moved past what the listener saw (a snapshot, say).
  if (store_->applied_seq() != listened_seq_) {
    listened_seq_ = store_->applied_seq();
    if (hooks_.on_reset) hooks_.on_reset();
  }
  Saw(store_->read_seq(), began);
  return true;
}

void Follower::Run() {
  const std::string log_prefix = absl::StrCat(options_.prefix, "/log/");
  while (!stopping()) {
    // The stream first, then the catch-up: an entry committed in between
    // is both read and announced, never missed.
    absl::StatusOr<std::unique_ptr<storage::etcd::WatchStream>> stream =
        client_->Watch(log_prefix, storage::etcd::PrefixEnd(log_prefix), 0,
                       options_.resync);
    if (!stream.ok()) {
      std::fprintf(stderr, "phalanxd: follower: watch: %s\n",
                   stream.status().ToString().c_str());
      Report();
      if (!Wait(options_.retry)) break;
      continue;
    }
    {
      MutexLock lock(&mu_);
      if (stop_) break;
      stream_ = stream->get();
    }
    // Bounded by the stream's lifetime (options_.resync) and Stop.
    bool healthy = true;
    while (!stopping()) {
      if (!CatchUp()) {
        healthy = false;
        break;
      }
      absl::StatusOr<etcdserverpb::WatchResponse> response = (*stream)->Read();
      if (!response.ok()) break;  // expired, cancelled or broken: renew
      int64_t last_seq = 0;
      for (const auto& event : response->events()) {
        last_seq = std::max(last_seq, SeqOfKey(event.kv().key()));
      }
      Saw(last_seq);
    }
    {
      MutexLock lock(&mu_);
      stream_ = nullptr;
    }
    stream->reset();
    if (!healthy && !Wait(options_.retry)) break;
  }
}

}  // namespace phalanx::server
