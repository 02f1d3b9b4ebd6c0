#include "bench/perf/watch_fanout.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "phalanx/v1/scheduler.grpc.pb.h"

namespace phalanx::perf {
namespace {

using Clock = std::chrono::steady_clock;

absl::Time FromTimestamp(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

// One stream. Callbacks of one reactor never run concurrently, so the
// latencies need no lock until OnDone.
class Watcher : public grpc::ClientReadReactor<v1::GangEvent> {
 public:
  void Start(const PhalanxdProcess& daemon, v1::Scheduler::Stub& stub) {
    daemon.Authorize(context_);
    stub.async()->WatchGangs(&context_, &request_, this);
    StartRead(&event_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (event_.type() != v1::EVENT_TYPE_BOOKMARK) {
      latencies_ms_.push_back(absl::ToDoubleMilliseconds(
          absl::Now() - FromTimestamp(event_.time())));
      received_.fetch_add(1, std::memory_order_relaxed);
    }
    StartRead(&event_);
  }
  void OnDone(const grpc::Status&) override {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }
  void Cancel() { context_.TryCancel(); }
  // Waits for OnDone at most `timeout`; returns whether it came.
  bool AwaitDone(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
  }
  std::vector<double>& latencies_ms() { return latencies_ms_; }
  int64_t received() const { return received_.load(std::memory_order_relaxed); }

 private:
  grpc::ClientContext context_;
  v1::WatchGangsRequest request_;
  v1::GangEvent event_;
  std::vector<double> latencies_ms_;  // read only after OnDone
  std::atomic<int64_t> received_{0};
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// Polls the daemon's phalanx_watchers gauge. The gauge is set after each
// loop batch, so each poll first sends a command through the loop (an
// ExplainGang of no gang, which changes nothing).
void WaitForWatchers(const PhalanxdProcess& daemon, v1::Scheduler::Stub& stub,
                     int watchers, WatchFanoutResult& result) {
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    grpc::ClientContext context;
    daemon.Authorize(context);
    v1::ExplainGangRequest request;
    request.set_gang_id("g-none");
    v1::ExplainGangResponse response;
    (void)stub.ExplainGang(&context, request, &response);
    result.watchers_connected =
        static_cast<int>(daemon.Metric("phalanx_watchers"));
    if (result.watchers_connected >= watchers) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Submits at the asked rate from one thread per 100 events/s (each paced
// at its share, offset from the others): one submit waits for its fsync,
// so a single thread could not reach 500/s on a disk with 2-5 ms syncs.
int64_t SubmitAtRate(const WatchFanoutOptions& options,
                     const SubmitOnce& submit) {
  const int threads =
      std::max(1, static_cast<int>(std::ceil(options.events_per_sec / 100)));
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(threads / options.events_per_sec));
  const int64_t total =
      static_cast<int64_t>(options.events_per_sec * options.seconds);
  std::atomic<int64_t> sent{0};
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> submitters;
  for (int t = 0; t < threads; ++t) {
    submitters.emplace_back([&, t] {
      Clock::time_point next = start + interval * t / threads;
      for (int64_t i = t; i < total; i += threads) {
        std::this_thread::sleep_until(next);
        next += interval;
        if (submit(i).ok()) sent.fetch_add(1);
      }
    });
  }
  for (std::thread& thread : submitters) thread.join();
  return sent.load();
}

}  // namespace

JsonObject WatchFanoutResult::ToJson() const {
  JsonObject json;
  json.Add("watchers", watchers)
      .Add("watchers_connected", watchers_connected)
      .Add("events_sent", events_sent)
      .Add("deliveries", deliveries)
      .Add("expected_deliveries", events_sent * watchers)
      .Add("p50_ms", p50_ms)
      .Add("p99_ms", p99_ms)
      .Add("max_ms", max_ms)
      .Add("events_per_sec", events_per_sec)
      .Add("seconds", seconds);
  return json;
}

WatchFanoutResult RunWatchFanout(const PhalanxdProcess& daemon,
                                 const WatchFanoutOptions& options,
                                 const SubmitOnce& submit) {
  WatchFanoutResult result;
  result.watchers = options.watchers;
  std::vector<std::unique_ptr<v1::Scheduler::Stub>> stubs;
  for (int c = 0; c < options.connections; ++c) {
    stubs.push_back(v1::Scheduler::NewStub(daemon.NewChannel(1000 + c)));
  }
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int w = 0; w < options.watchers; ++w) {
    watchers.push_back(std::make_unique<Watcher>());
    watchers.back()->Start(daemon, *stubs[w % stubs.size()]);
  }
  WaitForWatchers(daemon, *stubs[0], options.watchers, result);
  const Clock::time_point start = Clock::now();
  result.events_sent = SubmitAtRate(options, submit);
  const double submit_seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  result.events_per_sec =
      submit_seconds > 0
          ? static_cast<double>(result.events_sent) / submit_seconds
          : 0.0;
  // Let the last events arrive: stop early once every watcher has them all.
  const Clock::time_point drain = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < drain) {
    int64_t received = 0;
    for (auto& watcher : watchers) received += watcher->received();
    if (received >= result.events_sent * options.watchers) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& watcher : watchers) watcher->Cancel();
  std::vector<double> latencies;
  for (auto& watcher : watchers) {
    watcher->AwaitDone(absl::Seconds(10));
    latencies.insert(latencies.end(), watcher->latencies_ms().begin(),
                     watcher->latencies_ms().end());
  }
  result.deliveries = static_cast<int64_t>(latencies.size());
  result.p50_ms = Percentile(latencies, 50);
  result.p99_ms = Percentile(latencies, 99);
  result.max_ms = latencies.empty() ? 0 : latencies.back();
  return result;
}

}  // namespace phalanx::perf
