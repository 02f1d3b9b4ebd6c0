#include "bench/perf/watch_fanout.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "google/protobuf/arena.h"
#include "phalanx/v1/scheduler.grpc.pb.h"

ABSL_FLAG(std::string, watch_api, "batches",
          "Watch fan-out streams: batches (WatchGangBatches, several events "
          "per message) or events (WatchGangs, one per message)");

namespace phalanx::perf {

bool WatchBatchesFlag() { return absl::GetFlag(FLAGS_watch_api) != "events"; }

namespace {

using Clock = std::chrono::steady_clock;

absl::Time FromTimestamp(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

// The events of one message of either RPC.
absl::Span<const v1::GangEvent> Events(const v1::GangEvent& event) {
  return {&event, 1};
}
const google::protobuf::RepeatedPtrField<v1::GangEvent>& Events(
    const v1::GangEventBatch& batch) {
  return batch.events();
}

// Opens `reactor`'s stream: WatchGangs or WatchGangBatches by its type.
void StartWatch(v1::Scheduler::Stub& stub, grpc::ClientContext* context,
                const v1::WatchGangsRequest* request,
                grpc::ClientReadReactor<v1::GangEvent>* reactor) {
  stub.async()->WatchGangs(context, request, reactor);
}
void StartWatch(v1::Scheduler::Stub& stub, grpc::ClientContext* context,
                const v1::WatchGangsRequest* request,
                grpc::ClientReadReactor<v1::GangEventBatch>* reactor) {
  stub.async()->WatchGangBatches(context, request, reactor);
}

class AnyWatcher {
 public:
  virtual ~AnyWatcher() = default;
  virtual void Cancel() = 0;
  // Waits for OnDone at most `timeout`; returns whether it came.
  virtual bool AwaitDone(absl::Duration timeout) = 0;
  virtual std::vector<double>& latencies_ms() = 0;
  virtual int64_t received() const = 0;
  virtual int64_t messages() const = 0;
  // Whether the stream ended before Cancel (read only after OnDone).
  virtual bool failed() const = 0;
};

// One stream receiving `Message`s (GangEvent or GangEventBatch). Callbacks
// of one reactor never run concurrently, so the latencies need no lock
// until OnDone. Messages are parsed on an arena of the stream's own, reset
// every kArenaBytes: parsing into a heap message frees and allocates every
// event's Gang again, which cost the client more than gRPC itself.
template <typename Message>
class Watcher final : public grpc::ClientReadReactor<Message>,
                      public AnyWatcher {
 public:
  void Start(const PhalanxdProcess& daemon, v1::Scheduler::Stub& stub) {
    daemon.Authorize(context_);
    StartWatch(stub, &context_, &request_, this);
    message_ = google::protobuf::Arena::CreateMessage<Message>(&arena_);
    this->StartRead(message_);
    this->StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    const absl::Time now = absl::Now();
    int64_t events = 0;
    for (const v1::GangEvent& event : Events(*message_)) {
      if (event.type() == v1::EVENT_TYPE_BOOKMARK) continue;
      latencies_ms_.push_back(
          absl::ToDoubleMilliseconds(now - FromTimestamp(event.time())));
      ++events;
    }
    received_.fetch_add(events, std::memory_order_relaxed);
    messages_.fetch_add(1, std::memory_order_relaxed);
    if (arena_.SpaceUsed() > kArenaBytes) {
      arena_.Reset();
      message_ = google::protobuf::Arena::CreateMessage<Message>(&arena_);
    }
    this->StartRead(message_);
  }
  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    failed_ = !cancelled_;
    if (failed_) {
      std::fprintf(stderr, "watch_fanout: stream ended early: %d %s\n",
                   static_cast<int>(status.error_code()),
                   status.error_message().c_str());
    }
    done_ = true;
  }
  void Cancel() override {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
    }
    context_.TryCancel();
  }
  bool failed() const override {
    absl::MutexLock lock(&mu_);
    return failed_;
  }
  bool AwaitDone(absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
  }
  std::vector<double>& latencies_ms() override { return latencies_ms_; }
  int64_t received() const override {
    return received_.load(std::memory_order_relaxed);
  }
  int64_t messages() const override {
    return messages_.load(std::memory_order_relaxed);
  }

 private:
  grpc::ClientContext context_;
  v1::WatchGangsRequest request_;
  static constexpr uint64_t kArenaBytes = 64 << 10;
  google::protobuf::Arena arena_;
  Message* message_ = nullptr;        // on arena_
  std::vector<double> latencies_ms_;  // read only after OnDone
  std::atomic<int64_t> received_{0};
  std::atomic<int64_t> messages_{0};
  mutable absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
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

bench::JsonObject WatchFanoutResult::ToJson() const {
  bench::JsonObject json;
  json.Add("watchers", watchers)
      .Add("api", batches ? "WatchGangBatches" : "WatchGangs")
      .Add("watchers_connected", watchers_connected)
      .Add("messages", messages)
      .Add("events_per_message",
           messages > 0 ? static_cast<double>(deliveries) / messages : 0.0)
      .Add("events_sent", events_sent)
      .Add("deliveries", deliveries)
      .Add("streams_failed", streams_failed)
      .Add("watchers_short", watchers_short)
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
  result.batches = options.batches;
  std::vector<std::unique_ptr<v1::Scheduler::Stub>> stubs;
  for (int c = 0; c < options.connections; ++c) {
    stubs.push_back(v1::Scheduler::NewStub(daemon.NewChannel(1000 + c)));
  }
  std::vector<std::unique_ptr<AnyWatcher>> watchers;
  for (int w = 0; w < options.watchers; ++w) {
    v1::Scheduler::Stub& stub = *stubs[w % stubs.size()];
    if (options.batches) {
      auto watcher = std::make_unique<Watcher<v1::GangEventBatch>>();
      watcher->Start(daemon, stub);
      watchers.push_back(std::move(watcher));
    } else {
      auto watcher = std::make_unique<Watcher<v1::GangEvent>>();
      watcher->Start(daemon, stub);
      watchers.push_back(std::move(watcher));
    }
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
    result.messages += watcher->messages();
    if (watcher->failed()) ++result.streams_failed;
    if (watcher->received() < result.events_sent) ++result.watchers_short;
    latencies.insert(latencies.end(), watcher->latencies_ms().begin(),
                     watcher->latencies_ms().end());
  }
  result.deliveries = static_cast<int64_t>(latencies.size());
  result.p50_ms = bench::Percentile(latencies, 50);
  result.p99_ms = bench::Percentile(latencies, 99);
  result.max_ms = latencies.empty() ? 0 : latencies.back();
  return result;
}

}  // namespace phalanx::perf
