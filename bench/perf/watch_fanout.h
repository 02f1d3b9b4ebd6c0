// Watch fan-out: many WatchGangs streams (gRPC callback reactors, so a
// thousand watchers need no thousand threads) over a few connections, while
// one client submits gangs at a steady rate. Delivery latency = when a
// watcher receives an event minus the event's time (the server stamps it
// with its batch's time, before the durable commit; same host clock).
// The streams use WatchGangBatches (several events per message, what a
// watcher of a busy fleet would use) unless --watch_api=events asks for
// WatchGangs (one message per event).
#ifndef PHALANX_BENCH_PERF_WATCH_FANOUT_H_
#define PHALANX_BENCH_PERF_WATCH_FANOUT_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "bench/json.h"
#include "bench/perf/daemon_process.h"
#include "bench/stats.h"

namespace phalanx::perf {

// The --watch_api flag: true unless it is "events".
bool WatchBatchesFlag();

struct WatchFanoutOptions {
  int watchers = 1000;
  int connections = 10;
  double events_per_sec = 50;
  double seconds = 5;
  // WatchGangBatches; false: WatchGangs. Defaults to --watch_api.
  bool batches = WatchBatchesFlag();
};

struct WatchFanoutResult {
  int watchers = 0;
  int watchers_connected = 0;  // as the daemon's phalanx_watchers gauge saw
  bool batches = true;         // the RPC the streams used
  int64_t messages = 0;        // messages received over all watchers
  int64_t events_sent = 0;     // submits that succeeded
  // The rate the submits achieved: below the asked rate when each submit
  // waited for the fan-out of the one before (a daemon that fans out on its
  // scheduler loop throttles its own event rate, and its latencies then
  // look better than they are at the asked rate).
  double events_per_sec = 0;
  int64_t deliveries = 0;  // events received over all watchers
  int streams_failed = 0;  // streams the daemon ended before the cancel
  int watchers_short = 0;  // watchers that missed some event
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  double seconds = 0;

  bench::JsonObject ToJson() const;
};

// A submit that produces one event; called at the steady rate, from one
// thread per 100 events/s (so concurrently above 100/s).
using SubmitOnce = std::function<absl::Status(int64_t index)>;

// Opens the watchers, waits until the daemon counts them all (at most 30 s),
// submits for `seconds`, waits up to 5 s for the last deliveries, then
// cancels the streams.
WatchFanoutResult RunWatchFanout(const PhalanxdProcess& daemon,
                                 const WatchFanoutOptions& options,
                                 const SubmitOnce& submit);

}  // namespace phalanx::perf

#endif  // PHALANX_BENCH_PERF_WATCH_FANOUT_H_
