#include "bench/sim/sim_policies.h"

#include <limits>

#include "bench/sim/replay.h"
#include "bench/sim/sim_fleet.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::bench {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

TEST(PolicyConfigTest, KeepsTheBaseTopology) {
  core::Config base;
  base.topology_levels = {"block", "rack"};
  for (const std::string& name : PolicyNames()) {
    absl::StatusOr<core::Config> config = PolicyConfig(name, base);
    ASSERT_TRUE(config.ok()) << name << ": " << config.status();
    EXPECT_EQ(config->topology_levels, base.topology_levels) << name;
  }
}

TEST(PolicyConfigTest, FifoIsStrictSubmitOrderFirstFit) {
  absl::StatusOr<core::Config> fifo = PolicyConfig("fifo", {});
  ASSERT_TRUE(fifo.ok()) << fifo.status();
  EXPECT_TRUE(fifo->admission.strict_fifo);
  EXPECT_EQ(fifo->admission.ordering, core::Ordering::kSubmitOrder);
  EXPECT_TRUE(fifo->placement.first_fit);
  EXPECT_EQ(fifo->reservation.depth, 0);
  EXPECT_FALSE(fifo->preemption.enabled);
}

TEST(PolicyConfigTest, KueueLikeOrdersByUsageFirstAndSkipsWhatDoesNotFit) {
  absl::StatusOr<core::Config> kueue = PolicyConfig("kueue-like", {});
  ASSERT_TRUE(kueue.ok()) << kueue.status();
  EXPECT_FALSE(kueue->admission.strict_fifo);
  EXPECT_EQ(kueue->admission.ordering, core::Ordering::kFairShareFirst);
  EXPECT_TRUE(kueue->fair_share.enabled);
  EXPECT_EQ(kueue->admission.fair_share_wait_bound, absl::InfiniteDuration());
  EXPECT_FALSE(kueue->placement.first_fit);
  EXPECT_EQ(kueue->reservation.depth, 0);
  EXPECT_FALSE(kueue->preemption.enabled);
}

TEST(PolicyConfigTest, SlurmLikeIsPriorityAgeWithOneReservationForAnyHead) {
  absl::StatusOr<core::Config> slurm = PolicyConfig("slurm-like", {});
  ASSERT_TRUE(slurm.ok()) << slurm.status();
  EXPECT_FALSE(slurm->fair_share.enabled);
  EXPECT_EQ(slurm->admission.ordering, core::Ordering::kPriorityFairShareAge);
  EXPECT_EQ(slurm->reservation.depth, 1);
  EXPECT_EQ(slurm->reservation.min_priority,
            std::numeric_limits<int>::lowest());
  EXPECT_FALSE(slurm->preemption.enabled);
  EXPECT_FALSE(slurm->admission.strict_fifo);
}

TEST(PolicyConfigTest, SlurmDefaultPlansAsManyJobsAsCoreMayWithinADay) {
  absl::StatusOr<core::Config> slurm = PolicyConfig("slurm-default", {});
  ASSERT_TRUE(slurm.ok()) << slurm.status();
  EXPECT_FALSE(slurm->fair_share.enabled);
  EXPECT_EQ(slurm->admission.ordering, core::Ordering::kPriorityFairShareAge);
  EXPECT_EQ(slurm->reservation.depth, 64);  // bf_max_job_test, core's most
  EXPECT_EQ(slurm->reservation.window, absl::Hours(24));  // bf_window
  EXPECT_EQ(slurm->planning.max_gangs, 0);
  EXPECT_EQ(slurm->reservation.min_priority,
            std::numeric_limits<int>::lowest());
  EXPECT_FALSE(slurm->preemption.enabled);
  EXPECT_FALSE(slurm->admission.strict_fifo);
  EXPECT_FALSE(slurm->placement.domain_end_time_packing);
}

TEST(PolicyConfigTest, PhalanxPreemptsAndReserves) {
  absl::StatusOr<core::Config> phalanx = PolicyConfig("phalanx", {});
  ASSERT_TRUE(phalanx.ok()) << phalanx.status();
  EXPECT_TRUE(phalanx->preemption.enabled);
  EXPECT_GE(phalanx->reservation.depth, 1);
  EXPECT_TRUE(phalanx->fair_share.enabled);
  EXPECT_EQ(phalanx->admission.ordering, core::Ordering::kPriorityFairShareAge);
}

TEST(PolicyConfigTest, OverridesChangeOneLeverEach) {
  absl::StatusOr<core::Config> c = PolicyConfig(
      "phalanx:depth=3:horizon_h=2:min_runtime_m=5:after_h=1.5:"
      "order=fair_share_first:preempt=0",
      {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->reservation.depth, 3);
  EXPECT_EQ(c->preemption.horizon, absl::Hours(2));
  EXPECT_EQ(c->preemption.min_runtime, absl::Minutes(5));
  EXPECT_EQ(c->reservation.after, absl::Minutes(90));
  EXPECT_EQ(c->admission.ordering, core::Ordering::kFairShareFirst);
  EXPECT_FALSE(c->preemption.enabled);
  EXPECT_THAT(PolicyConfig("phalanx:depht=3", {}).status().message(),
              HasSubstr("unknown key"));
  EXPECT_THAT(PolicyConfig("phalanx:depth=x", {}).status().message(),
              HasSubstr("not a number"));
  EXPECT_THAT(PolicyConfig("phalanx:depth", {}).status().message(),
              HasSubstr("key=value"));
}

TEST(PolicyConfigTest, PolicyLeversHaveOverrides) {
  absl::StatusOr<core::Config> c =
      PolicyConfig("phalanx:fs_tier=2:window_h=24:domain_end=1", {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->admission.fair_share_first_below_priority, 2);
  EXPECT_EQ(c->reservation.window, absl::Hours(24));
  EXPECT_TRUE(c->placement.domain_end_time_packing);
  absl::StatusOr<core::Config> aged =
      PolicyConfig("phalanx:aging=0.5:aging_max=2:size_credit=0.25", {});
  ASSERT_TRUE(aged.ok()) << aged.status();
  EXPECT_EQ(aged->admission.aging_per_hour, 0.5);
  EXPECT_EQ(aged->admission.aging_max_levels, 2);
  EXPECT_EQ(aged->admission.fair_share_size_credit, 0.25);
  absl::StatusOr<core::Config> bounded =
      PolicyConfig("phalanx:wait_bound_h=12:usage_only=1", {});
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  EXPECT_EQ(bounded->admission.fair_share_wait_bound, absl::Hours(12));
  EXPECT_TRUE(bounded->fair_share.decayed_usage_only);
  absl::StatusOr<core::Config> slow_growth =
      PolicyConfig("phalanx:grow_m=30", {});
  ASSERT_TRUE(slow_growth.ok()) << slow_growth.status();
  EXPECT_EQ(slow_growth->elastic.grow_interval, absl::Minutes(30));
  absl::StatusOr<core::Config> protected_plan =
      PolicyConfig("phalanx:takeovers=1:quota_reserve=1", {});
  ASSERT_TRUE(protected_plan.ok()) << protected_plan.status();
  EXPECT_EQ(protected_plan->reservation.max_takeovers, 1);
  EXPECT_TRUE(protected_plan->reservation.for_quota_waits);
  absl::StatusOr<core::Config> unbounded =
      PolicyConfig("phalanx:wait_bound_h=0", {});
  ASSERT_TRUE(unbounded.ok()) << unbounded.status();
  EXPECT_EQ(unbounded->admission.fair_share_wait_bound,
            absl::InfiniteDuration());
  absl::StatusOr<core::Config> off = PolicyConfig("phalanx:domain_end=0", {});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->placement.domain_end_time_packing);
  // A core default, so phalanx has it; the baselines place by best fit (or
  // first fit) alone.
  EXPECT_TRUE(PolicyConfig("phalanx", {})->placement.domain_end_time_packing);
  for (const char* baseline :
       {"fifo", "kueue-like", "slurm-like", "slurm-default"}) {
    EXPECT_FALSE(PolicyConfig(baseline, {})->placement.domain_end_time_packing)
        << baseline;
  }
}

TEST(PolicyConfigTest, UnknownNameIsRefused) {
  EXPECT_THAT(PolicyConfig("lottery", {}).status().message(),
              HasSubstr("unknown policy"));
}

// Kueue's queueOrderingFunc with Admission Fair Sharing: LocalQueue usage,
// then priority, then creation time. One node; every job takes all of it,
// so jobs run one after another in admission order. Job 0 (team a) runs
// first and gives team a usage; jobs 1 and 2 wait behind it.
struct OrderCase {
  const char* name;
  std::vector<TraceJob> jobs;       // jobs[0] is the usage-maker
  std::vector<int> kueue_order;     // admissions under kueue-like
  std::vector<int> priority_first;  // under phalanx (priority first)
};

TraceJob J(double submit, const char* team, int priority) {
  TraceJob job;
  job.submit_time = absl::FromUnixSeconds(1700000000) + absl::Seconds(submit);
  job.duration = absl::Hours(2);
  job.gpus = 8;
  job.team = team;
  job.priority = priority;
  return job;
}

class KueueOrderTest : public ::testing::TestWithParam<OrderCase> {};

std::vector<int> AdmissionOrder(const std::string& policy,
                                const std::vector<TraceJob>& jobs) {
  FleetOptions options;
  options.nodes = 1;
  const SimFleet fleet = *MakeFleet(options);
  Workload w;
  w.jobs = jobs;
  w.estimates.assign(jobs.size(), absl::Hours(2));
  ReplayOptions replay;
  replay.record_events = true;
  replay.checkpoint_interval = absl::ZeroDuration();
  core::Config base;
  base.topology_levels = fleet.levels;
  absl::StatusOr<core::Config> config = PolicyConfig(policy, base);
  EXPECT_TRUE(config.ok()) << config.status();
  auto result = Replay(*config, fleet, w, replay);
  EXPECT_TRUE(result.ok()) << result.status();
  std::vector<int> order;
  if (!result.ok()) return order;
  for (const EventRecord& e : result->events) {
    if (e.type == core::EventType::kAdmitted) order.push_back(e.job);
  }
  return order;
}

TEST_P(KueueOrderTest, AdmitsInKueuesOrder) {
  EXPECT_THAT(AdmissionOrder("kueue-like", GetParam().jobs),
              ElementsAreArray(GetParam().kueue_order));
  EXPECT_THAT(AdmissionOrder("phalanx", GetParam().jobs),
              ElementsAreArray(GetParam().priority_first));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, KueueOrderTest,
    ::testing::Values(
        // b has no usage: it goes before a's higher priority.
        OrderCase{"UsageBeforePriority",
                  {J(0, "a", 0), J(10, "a", 1), J(20, "b", 0)},
                  {0, 2, 1},
                  {0, 1, 2}},
        // Equal usage (one queue): priority, then creation.
        OrderCase{"PriorityWithinAQueue",
                  {J(0, "a", 0), J(10, "a", 0), J(20, "a", 1)},
                  {0, 2, 1},
                  {0, 2, 1}},
        // Equal usage and priority: the earlier creation time.
        OrderCase{"CreationTimeLast",
                  {J(0, "a", 0), J(20, "c", 0), J(10, "b", 0)},
                  {0, 2, 1},
                  {0, 2, 1}},
        // Lower usage wins even against an older workload.
        OrderCase{"UsageBeforeAge",
                  {J(0, "a", 0), J(10, "a", 0), J(20, "b", 0)},
                  {0, 2, 1},
                  {0, 2, 1}}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace phalanx::bench
