#include "bench/perf/closed_loop.h"

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace phalanx::perf {
namespace {

using Clock = std::chrono::steady_clock;

struct ClientTally {
  int64_t ops = 0;
  int64_t errors = 0;
  std::string first_error;
  std::vector<double> latencies_ms;
};

void RunClient(int client, Clock::time_point deadline, int64_t max_ops,
               const Operation& op, ClientTally& tally) {
  for (int64_t i = 0; i < max_ops && Clock::now() < deadline; ++i) {
    const Clock::time_point start = Clock::now();
    const absl::Status status = op(client, i);
    tally.latencies_ms.push_back(
        std::chrono::duration<double, std::milli>(Clock::now() - start)
            .count());
    if (status.ok()) {
      ++tally.ops;
    } else {
      if (tally.errors++ == 0) tally.first_error = status.ToString();
    }
  }
}

}  // namespace

bench::JsonObject ClosedLoopResult::ToJson() const {
  bench::JsonObject json;
  json.Add("clients", clients)
      .Add("ops", ops)
      .Add("errors", errors)
      .Add("seconds", seconds)
      .Add("ops_per_sec", ops_per_sec)
      .Add("p50_ms", p50_ms)
      .Add("p99_ms", p99_ms);
  if (!first_error.empty()) json.Add("first_error", first_error);
  return json;
}

void ClosedLoopResult::Merge(const ClosedLoopResult& other) {
  clients = other.clients;
  ops += other.ops;
  errors += other.errors;
  seconds += other.seconds;
  if (first_error.empty()) first_error = other.first_error;
  latencies_ms.insert(latencies_ms.end(), other.latencies_ms.begin(),
                      other.latencies_ms.end());
  ops_per_sec = seconds > 0 ? ops / seconds : 0;
  p50_ms = bench::Percentile(latencies_ms, 50);
  p99_ms = bench::Percentile(latencies_ms, 99);
}

ClosedLoopResult RunClosedLoop(int clients, double seconds,
                               int64_t max_ops_per_client,
                               const Operation& op) {
  std::vector<ClientTally> tallies(clients);
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(seconds));
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back(RunClient, c, deadline, max_ops_per_client,
                         std::cref(op), std::ref(tallies[c]));
  }
  for (std::thread& thread : threads) thread.join();
  ClosedLoopResult result;
  result.clients = clients;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double>& latencies = result.latencies_ms;
  for (ClientTally& tally : tallies) {
    result.ops += tally.ops;
    result.errors += tally.errors;
    if (result.first_error.empty()) result.first_error = tally.first_error;
    latencies.insert(latencies.end(), tally.latencies_ms.begin(),
                     tally.latencies_ms.end());
  }
  result.ops_per_sec = result.seconds > 0 ? result.ops / result.seconds : 0;
  result.p50_ms = bench::Percentile(latencies, 50);
  result.p99_ms = bench::Percentile(latencies, 99);
  return result;
}

}  // namespace phalanx::perf
