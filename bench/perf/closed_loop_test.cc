#include "bench/perf/closed_loop.h"

#include <atomic>

#include "gtest/gtest.h"

namespace phalanx::perf {
namespace {

TEST(RunClosedLoopTest, StopsAtTheCountLimitAndCountsErrors) {
  std::atomic<int> calls{0};
  const ClosedLoopResult result = RunClosedLoop(
      4, /*seconds=*/60, /*max_ops_per_client=*/10, [&](int, int64_t index) {
        ++calls;
        return index == 0 ? absl::UnavailableError("first") : absl::OkStatus();
      });
  EXPECT_EQ(calls.load(), 40);
  EXPECT_EQ(result.ops, 36);
  EXPECT_EQ(result.errors, 4);
  EXPECT_EQ(result.first_error, "UNAVAILABLE: first");
  EXPECT_EQ(result.latencies_ms.size(), 40u);
  EXPECT_LT(result.seconds, 60);
}

TEST(ClosedLoopResultTest, MergeSumsAndRecomputes) {
  ClosedLoopResult a;
  a.clients = 8;
  a.ops = 100;
  a.seconds = 1;
  a.latencies_ms = {1, 2};
  ClosedLoopResult b;
  b.clients = 8;
  b.ops = 300;
  b.seconds = 1;
  b.latencies_ms = {3, 4, 5};
  ClosedLoopResult merged;
  merged.Merge(a);
  merged.Merge(b);
  EXPECT_EQ(merged.clients, 8);
  EXPECT_EQ(merged.ops, 400);
  EXPECT_DOUBLE_EQ(merged.ops_per_sec, 200);
  EXPECT_DOUBLE_EQ(merged.p50_ms, 3);
}

}  // namespace
}  // namespace phalanx::perf
