#include "bench/sim/replay.h"

#include <set>
#include <tuple>

#include "bench/sim/report.h"
#include "bench/sim/sim_policies.h"
#include "bench/sim/synthetic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

absl::Time T(double seconds) {
  return absl::FromUnixSeconds(1700000000) + absl::Seconds(seconds);
}

TraceJob Job(double submit, double duration, int gpus,
             const std::string& team = "a", int priority = 0) {
  TraceJob job;
  job.submit_time = T(submit);
  job.duration = absl::Seconds(duration);
  job.gpus = gpus;
  job.team = team;
  job.priority = priority;
  return job;
}

SimFleet Fleet(int nodes) {
  FleetOptions options;
  options.nodes = nodes;
  return *MakeFleet(options);
}

Workload Load(std::vector<TraceJob> jobs, uint64_t seed = 1) {
  Workload w;
  w.jobs = std::move(jobs);
  w.estimates = DrawEstimates(w.jobs, seed);
  return w;
}

ReplayOptions Every(absl::Duration bucket, bool events = false) {
  ReplayOptions options;
  options.bucket_width = bucket;
  options.record_events = events;
  return options;
}

core::Config PolicyOn(const std::string& name, const SimFleet& fleet) {
  core::Config base;
  base.topology_levels = fleet.levels;
  absl::StatusOr<core::Config> config = PolicyConfig(name, base);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.value_or(base);
}

TEST(JobSpecTest, SmallJobsAreOnePodLargeOnesWholeNodesInOneDomain) {
  const SimFleet fleet = Fleet(48);  // racks of 16 nodes, one block of 48
  const core::QueueName q("a");
  core::GangSpec small = JobSpec(Job(0, 1, 4), absl::Seconds(9), fleet, q);
  ASSERT_EQ(small.pod_sets.size(), 1u);
  EXPECT_EQ(small.pod_sets[0].count, 1);
  EXPECT_EQ(small.pod_sets[0].gpus, 4);
  EXPECT_EQ(small.pod_sets[0].topology.mode,
            core::TopologyMode::kUnconstrained);
  EXPECT_EQ(small.estimated_runtime, absl::Seconds(9));

  core::GangSpec twelve = JobSpec(Job(0, 1, 12), absl::Seconds(1), fleet, q);
  EXPECT_EQ(twelve.pod_sets[0].count, 2);  // rounded up to whole nodes
  EXPECT_EQ(twelve.TotalGpus(), 16);
  EXPECT_EQ(twelve.pod_sets[0].topology,
            (core::TopologyConstraint{core::TopologyMode::kRequired, "rack"}));

  core::GangSpec big = JobSpec(Job(0, 1, 256), absl::Seconds(1), fleet, q);
  EXPECT_EQ(big.pod_sets[0].topology,
            (core::TopologyConstraint{core::TopologyMode::kRequired, "block"}));

  core::GangSpec huge =
      JobSpec(Job(0, 1, 1024), absl::Seconds(1), Fleet(256), q);
  EXPECT_EQ(huge.pod_sets[0].count, 128);
  EXPECT_EQ(
      huge.pod_sets[0].topology,
      (core::TopologyConstraint{core::TopologyMode::kPreferred, "block"}));
}

TEST(TeamQueuesTest, EqualSharesRemainderToTheFirstTeamsByName) {
  const auto queues = TeamQueues({"a", "b", "c", "d", "e"}, Fleet(48));
  ASSERT_EQ(queues.size(), 6u);
  EXPECT_EQ(queues[0].name, core::QueueName("cohort"));
  // 384 GPUs / 5 = 76 remainder 4.
  EXPECT_THAT(queues[1].nominal_gpus, ElementsAre(Pair("H100", 77)));
  EXPECT_THAT(queues[4].nominal_gpus, ElementsAre(Pair("H100", 77)));
  EXPECT_THAT(queues[5].nominal_gpus, ElementsAre(Pair("H100", 76)));
  EXPECT_EQ(queues[5].parent, core::QueueName("cohort"));
  EXPECT_EQ(queues[5].borrowing_limit_gpus, -1);
}

TEST(TeamQueuesTest, MakesNamesCoreAccepts) {
  const auto queues = TeamQueues({"cohort", "team one", "team/one"}, Fleet(1));
  EXPECT_EQ(queues[1].name, core::QueueName("cohort-2"));
  EXPECT_EQ(queues[2].name, core::QueueName("team_one"));
  EXPECT_EQ(queues[3].name, core::QueueName("team_one-2"));
}

TEST(DrawEstimatesTest, FactorInRangeAndSeeded) {
  std::vector<TraceJob> jobs(1000, Job(0, 100, 1));
  const auto a = DrawEstimates(jobs, 7);
  EXPECT_EQ(a, DrawEstimates(jobs, 7));
  EXPECT_NE(a, DrawEstimates(jobs, 8));
  for (absl::Duration e : a) {
    EXPECT_GE(e, absl::Seconds(50));
    EXPECT_LT(e, absl::Seconds(300));
  }
}

TEST(ReplayTest, WaitsAndUtilizationOfATinyTrace) {
  // One node: A holds it 0..100; B arrives at 10 and waits until 100.
  const SimFleet fleet = Fleet(1);
  const Workload w = Load({Job(0, 100, 8), Job(10, 50, 8)});
  auto result =
      Replay(PolicyOn("kueue-like", fleet), fleet, w, Every(absl::Minutes(1)));
  ASSERT_TRUE(result.ok()) << result.status();
  const PolicyMetrics& m = result->metrics;
  EXPECT_EQ(m.jobs, 2);
  EXPECT_EQ(m.finished, 2);
  EXPECT_DOUBLE_EQ(m.wait_seconds->mean, 45);  // (0 + 90) / 2
  EXPECT_DOUBLE_EQ(m.wait_seconds->p99, 89.1);
  EXPECT_DOUBLE_EQ(*m.utilization, 1.0);  // window 0..10, all 8 GPUs held
  EXPECT_DOUBLE_EQ(*m.goodput_utilization, 1.0);
  EXPECT_DOUBLE_EQ(m.demand_gpu_hours, 8 * 150 / 3600.0);
  EXPECT_DOUBLE_EQ(m.lost_gpu_hours, 0);
  EXPECT_FALSE(m.large_wait_seconds.has_value());
  EXPECT_FALSE(m.high_priority_wait_seconds.has_value());
  EXPECT_EQ(result->steps, 4);  // t = 0, 10, 100, 150
}

TEST(ReplayTest, BlockedHoursCountMultiNodeGangsWaitingBesideFreeNodes) {
  // Two nodes. A (1 GPU) breaks node 0 up; B (16 GPUs) needs both nodes.
  const SimFleet fleet = Fleet(2);
  const Workload w = Load({Job(0, 3600, 1), Job(0, 60, 16)});
  auto result =
      Replay(PolicyOn("kueue-like", fleet), fleet, w, Every(absl::Minutes(1)));
  ASSERT_TRUE(result.ok()) << result.status();
  // One whole node free, B needs two: not "blocked" by that definition.
  EXPECT_DOUBLE_EQ(result->metrics.blocked_gpu_hours, 0);
  EXPECT_DOUBLE_EQ(result->metrics.wait_seconds->p50, 1800);
}

TEST(ReplayTest, NodesHeldForAReservationAreNotIdleCapacityForOthers) {
  // Three nodes. A holds node 0 for an hour; B (3 nodes) reserves all three
  // and waits for A; C (2 nodes, far too long to backfill) waits beside the
  // two idle nodes held for B. They are B's, not capacity C could use: C
  // is not blocked, and B (3 pods, 2 idle nodes) is not either.
  const SimFleet fleet = Fleet(3);
  const Workload w = Load({Job(0, 3600, 8), Job(0, 60, 24), Job(0, 30000, 16)});
  auto held =
      Replay(PolicyOn("slurm-like", fleet), fleet, w, Every(absl::Minutes(1)));
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_DOUBLE_EQ(held->metrics.blocked_gpu_hours, 0);
  // Without the reservation C takes the two idle nodes at once (nothing is
  // blocked either), and B waits for C.
  auto unheld =
      Replay(PolicyOn("kueue-like", fleet), fleet, w, Every(absl::Minutes(1)));
  ASSERT_TRUE(unheld.ok()) << unheld.status();
  EXPECT_DOUBLE_EQ(unheld->metrics.blocked_gpu_hours, 0);
  EXPECT_DOUBLE_EQ(unheld->metrics.wait_seconds->p50, 0);
}

TEST(ReplayTest, RefusesJobsThatCanNeverFit) {
  const SimFleet fleet = Fleet(1);
  auto result =
      Replay(PolicyOn("kueue-like", fleet), fleet,
             Load({Job(0, 10, 64), Job(1, 10, 1)}), Every(absl::Minutes(1)));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->metrics.jobs, 2);
  EXPECT_EQ(result->metrics.rejected, 1);
  EXPECT_EQ(result->metrics.finished, 1);
}

TEST(ReplayTest, FifoHoldsSmallJobsBehindABlockedHeadKueueLikeDoesNot) {
  // Node 0 busy until 100; B needs both nodes; C (1 GPU) could run at once.
  const SimFleet fleet = Fleet(2);
  const Workload w = Load({Job(0, 100, 8), Job(1, 10, 16), Job(2, 10, 1, "b")});
  auto fifo =
      Replay(PolicyOn("fifo", fleet), fleet, w, Every(absl::Minutes(1)));
  auto kueue =
      Replay(PolicyOn("kueue-like", fleet), fleet, w, Every(absl::Minutes(1)));
  ASSERT_TRUE(fifo.ok()) << fifo.status();
  ASSERT_TRUE(kueue.ok()) << kueue.status();
  // fifo: B waits 99 s, C waits for B: 108 s. kueue-like: C starts at once.
  EXPECT_DOUBLE_EQ(fifo->metrics.wait_seconds->mean, (0 + 99 + 108) / 3.0);
  EXPECT_DOUBLE_EQ(kueue->metrics.wait_seconds->mean, (0 + 99 + 0) / 3.0);
}

TEST(ReplayTest, PreemptedRunWithoutCheckpointsRestartsFromZero) {
  // One node. A (priority 0) runs from 0; B (priority 1, same queue) comes
  // at 1000 and preempts it; the launcher acknowledges 1 s later, B runs
  // 1001..1501, then A starts again from zero.
  const SimFleet fleet = Fleet(1);
  const Workload w = Load({Job(0, 10000, 8), Job(1000, 500, 8, "a", 1)});
  ReplayOptions options = Every(absl::Minutes(1), /*events=*/true);
  options.checkpoint_interval = absl::ZeroDuration();
  auto result = Replay(PolicyOn("phalanx", fleet), fleet, w, options);
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<std::pair<core::EventType, int>> events;
  for (const EventRecord& e : result->events)
    events.emplace_back(e.type, e.job);
  using core::EventType;
  EXPECT_THAT(events, ElementsAre(Pair(EventType::kAdmitted, 0),
                                  Pair(EventType::kPreempting, 0),
                                  Pair(EventType::kRequeued, 0),
                                  Pair(EventType::kAdmitted, 1),
                                  Pair(EventType::kAdmitted, 0)));
  EXPECT_EQ(result->events[2].time, T(1001));
  const PolicyMetrics& m = result->metrics;
  EXPECT_EQ(m.finished, 2);
  EXPECT_EQ(m.preemptions, 1);
  EXPECT_DOUBLE_EQ(m.lost_gpu_hours, 8 * 1001 / 3600.0);
  EXPECT_DOUBLE_EQ(m.high_priority_wait_seconds->p50, 1);
  EXPECT_DOUBLE_EQ(m.wait_seconds->mean, (500 + 1) / 2.0);
  // Window 0..1000: A held all 8 GPUs, but that run was thrown away.
  EXPECT_DOUBLE_EQ(*m.utilization, 1.0);
  EXPECT_DOUBLE_EQ(*m.goodput_utilization, 0.0);
  EXPECT_EQ(m.checkpoints, 0);
}

TEST(ReplayTest, PreemptedRunResumesFromItsLastCheckpoint) {
  // As above, with a checkpoint every 600 s of run time: A checkpoints at
  // 600, is preempted at 1000 (acknowledged 1001) and loses only 401 s; it
  // resumes at 1501 with 9,400 s left, checkpointing at 2101, 2701, ...
  // while that is before its end at 10901 (15 more). C comes at 10000 and
  // waits for that end.
  const SimFleet fleet = Fleet(1);
  const Workload w =
      Load({Job(0, 10000, 8), Job(1000, 500, 8, "a", 1), Job(10000, 10, 8)});
  ReplayOptions options = Every(absl::Minutes(1), /*events=*/true);
  options.checkpoint_interval = absl::Seconds(600);
  auto result = Replay(PolicyOn("phalanx", fleet), fleet, w, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->events.size(), 6u);
  EXPECT_EQ(result->events[4].type, core::EventType::kAdmitted);
  EXPECT_EQ(result->events[4].time, T(1501));
  EXPECT_EQ(result->events[5].job, 2);
  EXPECT_EQ(result->events[5].time, T(10901));
  const PolicyMetrics& m = result->metrics;
  EXPECT_EQ(m.finished, 3);
  EXPECT_EQ(m.preemptions, 1);
  EXPECT_DOUBLE_EQ(m.lost_gpu_hours, 8 * 401 / 3600.0);
  EXPECT_EQ(m.checkpoints, 1 + 15);
  // A waited 1001..1501, B 1000..1001, C 10000..10901.
  EXPECT_DOUBLE_EQ(m.wait_seconds->mean, (500 + 1 + 901) / 3.0);
  // Window 0..10000, all 8 GPUs held; kept: A's 600 s before the
  // preemption, B's 500 s, A's 8,499 s after.
  EXPECT_DOUBLE_EQ(*m.utilization, 1.0);
  EXPECT_DOUBLE_EQ(*m.goodput_utilization, (600 + 500 + 8499) / 10000.0);
}

TEST(ReplayTest, ARunFromACheckpointEndingBeforeTheAckJustCompletes) {
  // As above (A resumes at 1501 from its checkpoint at 600 and ends at
  // 10901), but C has priority 1 and comes at 10900.5: it preempts A, whose
  // run ends before the launcher would acknowledge (10901.5), so A just
  // completes and loses nothing more. A's estimate (30,000 s) makes C
  // expect a long wait, so the preemption is worth its lost work.
  const SimFleet fleet = Fleet(1);
  Workload w = Load({Job(0, 10000, 8), Job(1000, 500, 8, "a", 1),
                     Job(10900.5, 10, 8, "a", 1)});
  w.estimates[0] = absl::Seconds(30000);
  ReplayOptions options = Every(absl::Minutes(1), /*events=*/true);
  options.checkpoint_interval = absl::Seconds(600);
  auto result = Replay(PolicyOn("phalanx", fleet), fleet, w, options);
  ASSERT_TRUE(result.ok()) << result.status();
  for (const EventRecord& e : result->events) {
    EXPECT_FALSE(e.job == 0 && e.type == core::EventType::kRequeued &&
                 e.time > T(1001))
        << "A requeued at " << absl::FormatTime(e.time);
  }
  const PolicyMetrics& m = result->metrics;
  EXPECT_EQ(m.finished, 3);
  EXPECT_EQ(m.preemptions, 2);
  EXPECT_DOUBLE_EQ(m.lost_gpu_hours, 8 * 401 / 3600.0);
}

TEST(ReplayTest, TraceColumnOverridesTheCheckpointInterval) {
  // A never checkpoints (0 in its column) although the default would.
  const SimFleet fleet = Fleet(1);
  TraceJob a = Job(0, 10000, 8);
  a.checkpoint_interval = absl::ZeroDuration();
  const Workload w = Load({a, Job(1000, 500, 8, "a", 1)});
  ReplayOptions options = Every(absl::Minutes(1));
  options.checkpoint_interval = absl::Seconds(600);
  auto result = Replay(PolicyOn("phalanx", fleet), fleet, w, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_DOUBLE_EQ(result->metrics.lost_gpu_hours, 8 * 1001 / 3600.0);
  EXPECT_EQ(result->metrics.checkpoints, 0);
}

Workload SmallSynthetic(int nodes, double days, uint64_t seed) {
  SyntheticOptions options;
  options.seed = seed;
  options.days = days;
  options.fleet_gpus = nodes * 8;
  options.max_gang_gpus = nodes * 8;
  return Load(GenerateSynthetic(options), seed);
}

TEST(ReplayTest, NodeFailuresNeverDoubleBookAGpuAndEveryGangFinishes) {
  // 32 nodes failing every 100 h on average, 4 h each: about 0.3 % of
  // node-hours down, dozens of failures in 4 days plus the drain.
  const SimFleet fleet = Fleet(32);
  const Workload w = SmallSynthetic(32, 4, 5);
  ReplayOptions options = Every(absl::Minutes(10));
  options.node_mtbf = absl::Hours(100);
  options.check_gpus = true;
  for (const std::string& name : PolicyNames()) {
    auto result = Replay(PolicyOn(name, fleet), fleet, w, options);
    ASSERT_TRUE(result.ok()) << name << ": " << result.status();
    const PolicyMetrics& m = result->metrics;
    EXPECT_EQ(m.finished, m.jobs - m.rejected) << name;
    EXPECT_GT(m.node_failures, 10) << name;
    EXPECT_GT(m.evictions + m.repairs, 0) << name;
    EXPECT_GT(m.lost_gpu_hours, 0) << name;
  }
}

// The summary of every policy, checkpoints and failures on.
std::string Summary(const SimFleet& fleet, const Workload& w,
                    const ReplayOptions& options) {
  RunMeta meta;
  meta.jobs = static_cast<int64_t>(w.jobs.size());
  std::vector<PolicyOutcome> outcomes;
  std::string csvs;
  for (const std::string& name : PolicyNames()) {
    auto result = Replay(PolicyOn(name, fleet), fleet, w, options);
    EXPECT_TRUE(result.ok()) << name << ": " << result.status();
    if (!result.ok()) return "";
    PolicyOutcome outcome;
    outcome.name = name;
    outcome.metrics = result->metrics;
    csvs += SeriesCsv(result->series);
    outcomes.push_back(std::move(outcome));
  }
  return SummaryJson(meta, outcomes) + csvs;
}

TEST(ReplayTest, SameInputsGiveAByteIdenticalSummary) {
  const SimFleet fleet = Fleet(32);
  const Workload w = SmallSynthetic(32, 3, 4);
  ReplayOptions options = Every(absl::Minutes(10));
  options.node_mtbf = absl::Hours(150);
  options.checkpoint_interval = absl::Minutes(20);
  const std::string first = Summary(fleet, w, options);
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(first, Summary(fleet, w, options));
  // And the summary does depend on the failure seed.
  options.failure_seed = 2;
  EXPECT_NE(first, Summary(fleet, w, options));
}

TEST(ReplayTest, SameInputsSameResult) {
  SyntheticOptions options;
  options.days = 2;
  options.fleet_gpus = 512;
  options.max_gang_gpus = 512;
  const Workload w = Load(GenerateSynthetic(options), 3);
  const SimFleet fleet = Fleet(64);
  for (const std::string& name : PolicyNames()) {
    const core::Config config = PolicyOn(name, fleet);
    auto a = Replay(config, fleet, w, Every(absl::Minutes(10)));
    auto b = Replay(config, fleet, w, Every(absl::Minutes(10)));
    ASSERT_TRUE(a.ok()) << name << ": " << a.status();
    ASSERT_TRUE(b.ok()) << name << ": " << b.status();
    EXPECT_EQ(a->metrics.finished, a->metrics.jobs - a->metrics.rejected)
        << name;
    EXPECT_EQ(a->steps, b->steps) << name;
    EXPECT_EQ(a->metrics.wait_seconds->mean, b->metrics.wait_seconds->mean)
        << name;
    EXPECT_EQ(a->metrics.utilization, b->metrics.utilization) << name;
    EXPECT_EQ(a->metrics.blocked_gpu_hours, b->metrics.blocked_gpu_hours)
        << name;
    EXPECT_EQ(a->metrics.jain_fairness, b->metrics.jain_fairness) << name;
    ASSERT_EQ(a->series.size(), b->series.size()) << name;
  }
}

// A two-node gang of team b waits for team a's three-node job ahead of it
// (four nodes, one free): under slurm-like it reserves, and the tracker
// charges its whole wait to the job running on its reserved nodes.
// Gathering holders decides alike.
TEST(ReplayTest, ExplainedJobIsHeldByTheJobOnItsReservedNodes) {
  const SimFleet fleet = Fleet(4);
  const Workload w = Load({Job(0, 1000, 24, "a"), Job(10, 100, 16, "b")});
  const core::Config config = PolicyOn("slurm-like", fleet);
  ReplayOptions options = Every(absl::Minutes(10));
  auto plain = Replay(config, fleet, w, options);
  options.explain_jobs = {1};
  auto explained = Replay(config, fleet, w, options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(explained.ok()) << explained.status();
  EXPECT_EQ(plain->waits, explained->waits);
  EXPECT_TRUE(plain->holds.empty());
  ASSERT_EQ(explained->holds.size(), 1u);
  ASSERT_TRUE(explained->waits[1].has_value());
  EXPECT_EQ(*explained->waits[1], absl::Seconds(990));
  EXPECT_THAT(explained->holds[0].held,
              ElementsAre(Pair("RESERVED, waiting for job 0 (a, 24 GPUs, "
                               "priority 0) to end",
                               absl::Seconds(990))));
}

// Elastic jobs (TraceJob::elastic): half their pods at the least, the same
// work at any size; kueue-like neither reserves nor preempts.
TraceJob ElasticJob(double submit, double duration, int gpus,
                    const std::string& team = "a", int priority = 0) {
  TraceJob job = Job(submit, duration, gpus, team, priority);
  job.elastic = true;
  return job;
}

// Every job's estimate is its duration.
Workload Exact(std::vector<TraceJob> jobs) {
  Workload w = Load(std::move(jobs));
  for (size_t i = 0; i < w.jobs.size(); ++i) {
    w.estimates[i] = w.jobs[i].duration;
  }
  return w;
}

// The (event, job, seconds since T(0), GPUs) of `result`'s events of `types`.
std::vector<std::tuple<core::EventType, int, double, int64_t>> EventsOf(
    const ReplayResult& result, std::set<core::EventType> types) {
  std::vector<std::tuple<core::EventType, int, double, int64_t>> events;
  for (const EventRecord& e : result.events) {
    if (!types.contains(e.type)) continue;
    events.emplace_back(e.type, e.job, absl::ToDoubleSeconds(e.time - T(0)),
                        e.gpus);
  }
  return events;
}

TEST(JobSpecTest, AnElasticJobMayRunOnHalfItsPods) {
  const core::GangSpec spec = JobSpec(ElasticJob(0, 1, 64), absl::Seconds(1),
                                      Fleet(48), core::QueueName("a"));
  EXPECT_EQ(spec.pod_sets[0].count, 8);
  EXPECT_EQ(spec.pod_sets[0].min_count, 4);
  EXPECT_EQ(spec.estimated_runtime, absl::Seconds(1));  // at full size
}

TEST(ElasticReplayTest, AdmittedAtHalfSizeItRunsTwiceAsLong) {
  // Four nodes. F holds two until 5000; E (4 pods, 1000 s of work at full
  // size) starts at 10 on the other two and ends at 10 + 1000 × 4 / 2 =
  // 2010, when C takes its nodes.
  const SimFleet fleet = Fleet(4);
  const Workload w =
      Exact({Job(0, 5000, 16), ElasticJob(10, 1000, 32), Job(20, 100, 16)});
  ReplayOptions options = Every(absl::Minutes(1), /*events=*/true);
  options.checkpoint_interval = absl::ZeroDuration();
  options.check_gpus = true;
  auto result = Replay(PolicyOn("kueue-like", fleet), fleet, w, options);
  ASSERT_TRUE(result.ok()) << result.status();
  using core::EventType;
  EXPECT_THAT(EventsOf(*result, {EventType::kAdmitted, EventType::kResized}),
              ElementsAre(std::tuple(EventType::kAdmitted, 0, 0.0, 16),
                          std::tuple(EventType::kAdmitted, 1, 10.0, 16),
                          std::tuple(EventType::kAdmitted, 2, 2010.0, 16)));
  EXPECT_EQ(result->first_gpus[1], 16);
  EXPECT_EQ(result->finishes[1], T(2010));
  const PolicyMetrics& m = result->metrics;
  EXPECT_EQ(m.finished, 3);
  EXPECT_EQ(m.elastic_jobs, 1);
  EXPECT_EQ(m.elastic_admitted_below_full, 1);
  EXPECT_EQ(m.grows + m.shrinks, 0);
  EXPECT_DOUBLE_EQ(m.lost_gpu_hours, 0);
  // Its work is what it asked for: 32 GPUs × 1000 s.
  EXPECT_DOUBLE_EQ(m.demand_gpu_hours,
                   (16 * 5000 + 32 * 1000 + 16 * 100) / 3600.0);
}

TEST(ElasticReplayTest, GrownItEndsSoonerFromItsLastCheckpoint) {
  // F ends at 1000; E, started at 10 on two pods, checkpointed at 610 (300
  // s of work at full size) and may grow (every 10 min) from 610: at 1000
  // it takes all four nodes, loses the 390 s since its checkpoint and ends
  // at 1000 + (3000 − 300) = 3700, where C starts (at half size it would
  // end at 6010).
  const SimFleet fleet = Fleet(4);
  const Workload w =
      Exact({Job(0, 1000, 16), ElasticJob(10, 3000, 32), Job(1500, 100, 32)});
  ReplayOptions options = Every(absl::Minutes(1), /*events=*/true);
  options.checkpoint_interval = absl::Seconds(600);
  options.check_gpus = true;
  auto result =
      Replay(PolicyOn("kueue-like:grow_m=10", fleet), fleet, w, options);
  ASSERT_TRUE(result.ok()) << result.status();
  using core::EventType;
  EXPECT_THAT(EventsOf(*result, {EventType::kAdmitted, EventType::kResized}),
              ElementsAre(std::tuple(EventType::kAdmitted, 0, 0.0, 16),
                          std::tuple(EventType::kAdmitted, 1, 10.0, 16),
                          std::tuple(EventType::kResized, 1, 1000.0, 32),
                          std::tuple(EventType::kAdmitted, 2, 3700.0, 32)));
  const PolicyMetrics& m = result->metrics;
  EXPECT_EQ(m.grows, 1);
  EXPECT_EQ(m.shrinks, 0);
  EXPECT_EQ(result->resizes, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(result->finishes[1], T(3700));
  const std::string csv = ElasticCsv(w.jobs, *result, T(0));
  EXPECT_EQ(csv,
            "job_line,team,gpus,priority,submit_hours,wait_hours,first_gpus,"
            "resizes,run_hours\n"
            "1,a,32,0,0.002778,0.000000,16,1,1.025000\n");
  EXPECT_DOUBLE_EQ(m.lost_gpu_hours, 16 * 390 / 3600.0);
}

TEST(ElasticReplayTest, ShrunkItRunsOnAndEndsLater) {
  // E runs on all four nodes from 0 (4000 s of work), checkpoints at 600;
  // P (priority 1) comes at 1000 and E is shrunk instead of preempted: it
  // keeps running, the launcher acknowledges at 1001, E restarts from its
  // checkpoint on two pods (401 s on four lost) and P starts. E never
  // grows back (grow_m) and ends at 1001 + (4000 − 600) × 2 = 7801, where
  // C starts; unshrunk it would have ended at 4000.
  const SimFleet fleet = Fleet(4);
  const Workload w = Exact({ElasticJob(0, 4000, 32), Job(1000, 500, 16, "a", 1),
                            Job(2000, 100, 32)});
  ReplayOptions options = Every(absl::Minutes(1), /*events=*/true);
  options.checkpoint_interval = absl::Seconds(600);
  options.check_gpus = true;
  auto result =
      Replay(PolicyOn("phalanx:grow_m=100000", fleet), fleet, w, options);
  ASSERT_TRUE(result.ok()) << result.status();
  using core::EventType;
  EXPECT_THAT(EventsOf(*result, {EventType::kAdmitted, EventType::kResized,
                                 EventType::kPreempting, EventType::kRequeued}),
              ElementsAre(std::tuple(EventType::kAdmitted, 0, 0.0, 32),
                          std::tuple(EventType::kPreempting, 0, 1000.0, 32),
                          std::tuple(EventType::kResized, 0, 1001.0, 16),
                          std::tuple(EventType::kAdmitted, 1, 1001.0, 16),
                          std::tuple(EventType::kAdmitted, 2, 7801.0, 32)));
  const PolicyMetrics& m = result->metrics;
  EXPECT_EQ(m.finished, 3);
  EXPECT_EQ(m.preemptions, 0);
  EXPECT_EQ(m.shrinks, 1);
  EXPECT_EQ(m.grows, 0);
  EXPECT_EQ(result->preemptions, (std::vector<int>{0, 0, 0}));
  EXPECT_DOUBLE_EQ(m.lost_gpu_hours, 32 * 401 / 3600.0);
  // E waited for nothing; it was never requeued.
  ASSERT_TRUE(result->waits[0].has_value());
  EXPECT_EQ(*result->waits[0], absl::ZeroDuration());
  EXPECT_EQ(result->finishes[0], T(7801));
}

TEST(ElasticReplayTest, ARunThatEndsWhileShrinkingJustCompletes) {
  // As above, but E's work ends at 1000.5 s, inside the second before the
  // acknowledgement (core expects it to run much longer): it succeeds at
  // full size, nothing is lost.
  const SimFleet fleet = Fleet(4);
  Workload w = Exact({ElasticJob(0, 1000.5, 32), Job(1000, 500, 16, "a", 1)});
  w.estimates[0] = absl::Seconds(10000);
  ReplayOptions options = Every(absl::Minutes(1), /*events=*/true);
  options.checkpoint_interval = absl::Seconds(600);
  options.check_gpus = true;
  auto result = Replay(PolicyOn("phalanx", fleet), fleet, w, options);
  ASSERT_TRUE(result.ok()) << result.status();
  using core::EventType;
  EXPECT_THAT(EventsOf(*result, {EventType::kAdmitted, EventType::kResized,
                                 EventType::kPreempting}),
              ElementsAre(std::tuple(EventType::kAdmitted, 0, 0.0, 32),
                          std::tuple(EventType::kPreempting, 0, 1000.0, 32),
                          std::tuple(EventType::kAdmitted, 1, 1000.5, 16)));
  EXPECT_EQ(result->metrics.finished, 2);
  EXPECT_EQ(result->metrics.shrinks, 0);
  EXPECT_DOUBLE_EQ(result->metrics.lost_gpu_hours, 0);
}

TEST(ElasticReplayTest, PreemptedWholeAtItsMinimumItResumesItsWork) {
  // F holds two nodes for long; E starts at 10 on the other two (its
  // minimum), checkpoints at 610 (300 s of its 4000 s of work). P
  // (priority 1) comes at 1010: E cannot shrink further and is the
  // cheapest victim, preempted whole and requeued at 1011. It starts again
  // at 1511, when P ends, and runs its 3700 s left at half size: to 8911.
  const SimFleet fleet = Fleet(4);
  const Workload w = Exact({Job(0, 100000, 16), ElasticJob(10, 4000, 32),
                            Job(1010, 500, 16, "a", 1)});
  ReplayOptions options = Every(absl::Minutes(1), /*events=*/true);
  options.checkpoint_interval = absl::Seconds(600);
  options.check_gpus = true;
  auto result = Replay(PolicyOn("phalanx", fleet), fleet, w, options);
  ASSERT_TRUE(result.ok()) << result.status();
  using core::EventType;
  EXPECT_THAT(
      EventsOf(*result, {EventType::kAdmitted, EventType::kResized,
                         EventType::kPreempting, EventType::kRequeued}),
      ElementsAre(std::tuple(EventType::kAdmitted, 0, 0.0, 16),
                  std::tuple(EventType::kAdmitted, 1, 10.0, 16),
                  std::tuple(EventType::kPreempting, 1, 1010.0, 16),
                  std::tuple(EventType::kRequeued, 1, 1011.0, 32),  // asked
                  std::tuple(EventType::kAdmitted, 2, 1011.0, 16),
                  std::tuple(EventType::kAdmitted, 1, 1511.0, 16)));
  EXPECT_EQ(result->finishes[1], T(8911));
  const PolicyMetrics& m = result->metrics;
  EXPECT_EQ(m.preemptions, 1);
  EXPECT_EQ(m.shrinks + m.grows, 0);
  EXPECT_EQ(m.elastic_admitted_below_full, 2);
  EXPECT_DOUBLE_EQ(m.lost_gpu_hours, 16 * 401 / 3600.0);
}

TEST(ElasticReplayTest, ASyntheticElasticLabNeverDoubleBooksAndFinishes) {
  // Every gang of 64 GPUs or more elastic, with node failures: each job
  // finishes, resizes happen, and the same inputs give the same result.
  const SimFleet fleet = Fleet(32);
  SyntheticOptions synthetic;
  synthetic.seed = 3;
  synthetic.days = 4;
  synthetic.fleet_gpus = 32 * 8;
  synthetic.max_gang_gpus = 32 * 8;
  synthetic.elastic_fraction = 1;
  const Workload w = Load(GenerateSynthetic(synthetic), 3);
  ReplayOptions options = Every(absl::Minutes(10));
  options.node_mtbf = absl::Hours(100);
  options.check_gpus = true;
  const core::Config config = PolicyOn("phalanx", fleet);
  auto result = Replay(config, fleet, w, options);
  ASSERT_TRUE(result.ok()) << result.status();
  const PolicyMetrics& m = result->metrics;
  EXPECT_EQ(m.finished, m.jobs - m.rejected);
  EXPECT_GT(m.elastic_jobs, 0);
  EXPECT_GT(m.elastic_admitted_below_full, 0);
  EXPECT_GT(m.grows, 0);
  auto again = Replay(config, fleet, w, options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(result->waits, again->waits);
  EXPECT_EQ(result->resizes, again->resizes);
}

}  // namespace
}  // namespace phalanx::bench
