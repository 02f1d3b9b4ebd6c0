#include "bench/sim/sim_metrics.h"

#include "gtest/gtest.h"

namespace phalanx::bench {
namespace {

TEST(SummarizeTest, SortsAndIsNullWhenEmpty) {
  EXPECT_FALSE(Summarize({}).has_value());
  auto d = Summarize({10, 0, 5});
  ASSERT_TRUE(d.has_value());
  EXPECT_DOUBLE_EQ(d->mean, 5);
  EXPECT_DOUBLE_EQ(d->p50, 5);
  EXPECT_DOUBLE_EQ(d->p95, 9.5);
}

TEST(JainIndexTest, OneWhenEqualOneOverNWhenOneTakesAll) {
  EXPECT_FALSE(JainIndex({}).has_value());
  EXPECT_DOUBLE_EQ(*JainIndex({0.5, 0.5, 0.5}), 1.0);
  EXPECT_DOUBLE_EQ(*JainIndex({1, 0, 0, 0}), 0.25);
  EXPECT_DOUBLE_EQ(*JainIndex({1, 2}), 9.0 / 10.0);
  EXPECT_DOUBLE_EQ(*JainIndex({0, 0}), 1.0);
}

class AccumulatorTest : public ::testing::Test {
 protected:
  absl::Time T(double hours) { return t0_ + absl::Seconds(hours * 3600); }
  absl::Time t0_ = absl::FromUnixSeconds(1000000);
};

TEST_F(AccumulatorTest, UtilizationAndGoodputCountOnlyTheWindow) {
  // Window 10 h, 10 GPUs: capacity 100 GPU-hours.
  MetricsAccumulator m(T(0), T(10), 10, 2, absl::Hours(1));
  m.AddRun(0, 4, T(0), T(5), T(5));     // completed: 20 GPU-h
  m.AddRun(1, 8, T(8), T(20), T(8));    // 16 in window, all 96 lost
  m.AddRun(1, 8, T(20), T(32), T(32));  // outside the window
  const PolicyMetrics p = m.Finish();
  EXPECT_DOUBLE_EQ(*p.utilization, 0.36);
  EXPECT_DOUBLE_EQ(*p.goodput_utilization, 0.20);
  EXPECT_DOUBLE_EQ(p.lost_gpu_hours, 96);
}

TEST_F(AccumulatorTest, WorkUpToTheLastCheckpointIsKept) {
  MetricsAccumulator m(T(0), T(10), 10, 1, absl::Hours(1));
  // 2 GPUs 0..6 h, checkpointed at 4 h: 8 GPU-h kept, 4 lost.
  m.AddRun(0, 2, T(0), T(6), T(4));
  const PolicyMetrics p = m.Finish();
  EXPECT_DOUBLE_EQ(*p.utilization, 0.12);
  EXPECT_DOUBLE_EQ(*p.goodput_utilization, 0.08);
  EXPECT_DOUBLE_EQ(p.lost_gpu_hours, 4);
}

TEST_F(AccumulatorTest, JainComparesReceivedWithStartOnArrival) {
  MetricsAccumulator m(T(0), T(10), 10, 2, absl::Hours(1));
  // Team 0 would have had 4 × 5 = 20 and got it; team 1 would have had
  // 2 × 10 = 20 (truncated at the window's end) and got 10.
  m.AddJob(0, 4, T(0), absl::Hours(5), true);
  m.AddJob(1, 2, T(0), absl::Hours(30), true);
  m.AddRun(0, 4, T(0), T(5), T(5));
  m.AddRun(1, 2, T(5), T(35), T(35));
  const PolicyMetrics p = m.Finish();
  EXPECT_DOUBLE_EQ(*p.jain_fairness, *JainIndex({1.0, 0.5}));
  EXPECT_EQ(p.jobs, 2);
  EXPECT_DOUBLE_EQ(p.demand_gpu_hours, 20 + 60);
}

TEST_F(AccumulatorTest, WaitsSplitIntoLargeAndHighPriority) {
  MetricsAccumulator m(T(0), T(1), 8, 1, absl::Hours(1));
  m.AddWait(absl::Seconds(10), 1, 0);
  m.AddWait(absl::Seconds(20), 64, 0);
  m.AddWait(absl::Seconds(30), 8, 1);
  const PolicyMetrics p = m.Finish();
  EXPECT_DOUBLE_EQ(p.wait_seconds->mean, 20);
  EXPECT_DOUBLE_EQ(p.large_wait_seconds->p50, 20);
  EXPECT_DOUBLE_EQ(p.high_priority_wait_seconds->p99, 30);
}

TEST_F(AccumulatorTest, QuarterFleetWaitsAndLongestWaitPerSizeClass) {
  MetricsAccumulator m(T(0), T(1), 1024, 1, absl::Hours(1));  // ¼ = 256
  m.AddWait(absl::Seconds(10), 255, 0);
  m.AddWait(absl::Seconds(40), 256, 0);
  m.AddWait(absl::Seconds(30), 1024, 0);
  m.AddWait(absl::Seconds(5), 8, 0);
  m.AddWait(absl::Seconds(7), 2, 0);
  const PolicyMetrics p = m.Finish();
  EXPECT_DOUBLE_EQ(p.quarter_fleet_wait_seconds->p50, 35);
  EXPECT_DOUBLE_EQ(*p.quarter_fleet_longest_wait_seconds, 40);
  ASSERT_EQ(p.longest_wait_seconds_by_size.size(), 6u);
  EXPECT_EQ(p.longest_wait_seconds_by_size[0], 7);             // 1-8
  EXPECT_EQ(p.longest_wait_seconds_by_size[1], std::nullopt);  // 9-63
  EXPECT_EQ(p.longest_wait_seconds_by_size[2], 10);            // 64-255
  EXPECT_EQ(p.longest_wait_seconds_by_size[3], 40);            // 256-511
  EXPECT_EQ(p.longest_wait_seconds_by_size[4], std::nullopt);
  EXPECT_EQ(p.longest_wait_seconds_by_size[5], 30);  // 1024+
  EXPECT_EQ(SizeClassOf(0), 0);
  EXPECT_EQ(SizeClassOf(9), 1);
  EXPECT_EQ(SizeClassOf(4096), 5);
}

TEST_F(AccumulatorTest, IntervalsFeedBlockedHoursFragmentationAndSeries) {
  MetricsAccumulator m(T(0), T(2), 16, 1, absl::Hours(1));
  FleetSample s;
  s.allocated_gpus = 8;
  s.pending_gangs = 3;
  s.node_fragmentation = 0.5;
  s.blocked_gpus = 16;
  m.AddInterval(T(0), T(1.5), s);
  s.allocated_gpus = 16;
  s.node_fragmentation = 0;
  s.blocked_gpus = 0;
  m.AddInterval(T(1.5), T(3), s);  // 1 h of it after the window
  const PolicyMetrics p = m.Finish();
  EXPECT_DOUBLE_EQ(p.blocked_gpu_hours, 24);
  EXPECT_DOUBLE_EQ(*p.fragmentation_node, 0.375);  // 0.5 × 1.5 h ÷ 2 h
  const auto rows = m.Series();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_DOUBLE_EQ(rows[0].utilization, 0.5);
  EXPECT_DOUBLE_EQ(rows[1].allocated_gpus, 12);  // half 8, half 16
  EXPECT_DOUBLE_EQ(rows[2].hours, 2);
}

}  // namespace
}  // namespace phalanx::bench
