#include "bench/sim/whatif.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "bench/sim/replay.h"
#include "bench/sim/sim_fleet.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::bench {
namespace {

using ::testing::HasSubstr;

// Writes `text` to a fresh file named `name` under the test's temp dir.
std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
  std::ofstream(path) << text;
  return path;
}

TEST(WhatIfFilesTest, ReadsAConfigAsConfigGetWritesIt) {
  const std::string path = WriteTemp(
      "candidate.json",
      R"({"topologyLevels": ["block", "rack"], "reservation": {"depth": 1}})");
  absl::StatusOr<NamedConfig> config = ReadConfigFile(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->name, "candidate");
  EXPECT_EQ(config->config.reservation.depth, 1);
  EXPECT_EQ(config->config.topology_levels,
            (std::vector<std::string>{"block", "rack"}));
}

TEST(WhatIfFilesTest, ABadConfigNamesTheFileAndTheField) {
  const std::string path =
      WriteTemp("bad.json", R"({"reservation": {"depth": -1}})");
  absl::StatusOr<NamedConfig> config = ReadConfigFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr(path));
  EXPECT_THAT(config.status().message(), HasSubstr("depth"));
  EXPECT_TRUE(absl::IsNotFound(ReadConfigFile("/nonexistent/c.json").status()));
}

TEST(WhatIfFilesTest, ReadsQueuesAsQueuesListWritesThem) {
  const std::string path = WriteTemp("queues.json", R"({"queues": [
      {"name": "research", "parent": "org", "weight": 2,
       "nominalGpus": {"H100": "16"}},
      {"name": "org"}]})");
  absl::StatusOr<std::vector<core::Queue>> queues = ReadQueuesFile(path);
  ASSERT_TRUE(queues.ok()) << queues.status();
  ASSERT_EQ(queues->size(), 2u);
  EXPECT_EQ((*queues)[0].parent, core::QueueName("org"));
  EXPECT_EQ((*queues)[0].nominal_gpus.at("H100"), 16);
  EXPECT_FALSE(ReadQueuesFile(WriteTemp("none.json", "{}")).ok());
}

// Two 8-GPU nodes; an exported history of three gangs in queue "a" and
// "b" under cohort "org" (children before their parent, as any order).
struct SmallReplay {
  SimFleet fleet;
  Workload workload;
};

SmallReplay MakeSmallReplay() {
  FleetOptions options;
  options.nodes = 2;
  options.nodes_per_rack = 2;
  SmallReplay r{*MakeFleet(options), {}};
  absl::StatusOr<std::vector<TraceJob>> jobs = ParseTrace(
      "timestamp,duration,num_gpus,cluster,pods,gpus_per_pod,topology,start,"
      "complete,estimated_runtime_s\n"
      "0,3600,16,a,2,8,required:rack,0,1,3600\n"
      "60,1800,8,b,1,8,,3600,1,\n"
      "120,,8,b,1,8,,,0,600\n");
  EXPECT_TRUE(jobs.ok()) << jobs.status();
  r.workload.jobs = *jobs;
  ResolveOpenRuns(r.workload.jobs, absl::Hours(24));
  r.workload.estimates = DrawEstimates(r.workload.jobs, 1);
  core::Queue org;
  org.name = core::QueueName("org");
  core::Queue a;
  a.name = core::QueueName("a");
  a.parent = org.name;
  core::Queue b = a;
  b.name = core::QueueName("b");
  r.workload.queues = {a, b, org};
  return r;
}

TEST(WhatIfReplayTest, ReplaysAHistoryOnItsQueuesAndComparesStarts) {
  SmallReplay r = MakeSmallReplay();
  EXPECT_EQ(r.workload.jobs[2].duration, absl::Minutes(10));
  EXPECT_EQ(r.workload.estimates[0], absl::Hours(1));  // declared, not drawn
  core::Config config;
  config.topology_levels = r.fleet.levels;
  absl::StatusOr<ReplayResult> result =
      Replay(config, r.fleet, r.workload, ReplayOptions{});
  ASSERT_TRUE(result.ok()) << result.status();
  PolicyOutcome outcome;
  outcome.name = "current";
  outcome.waits = result->waits;
  outcome.first_starts = result->first_starts;
  outcome.preemptions = result->preemptions;
  // The 16-GPU gang holds both nodes for an hour; the others start then.
  std::vector<std::optional<absl::Duration>> errors =
      StartErrors(r.workload.jobs, outcome);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0], absl::ZeroDuration());
  EXPECT_EQ(errors[1], absl::ZeroDuration());
  EXPECT_FALSE(errors[2].has_value());  // no recorded start
  const std::string md = QueuesMarkdown(r.workload.jobs, {outcome, outcome});
  EXPECT_THAT(md, HasSubstr("| `a` | `current` | 1 | 0.00 | 0.00 |"));
  EXPECT_THAT(md, HasSubstr("| `b` | `current` | 2 |"));
  EXPECT_THAT(QueuesCsv(r.workload.jobs, {outcome}),
              HasSubstr("queue,policy,finished,wait_p50_h"));
  EXPECT_EQ(StartsCsv(r.workload.jobs, {outcome}),
            "gang,queue,gpus,recorded,current\n"
            "line 2,a,16,0.000,0.000\n"
            "line 3,b,8,3600.000,3600.000\n");
}

TEST(WhatIfReplayTest, AJobOfAQueueNotGivenIsRefusedByNameAndParentsTakeGangs) {
  SmallReplay r = MakeSmallReplay();
  r.workload.queues.erase(r.workload.queues.begin() + 1);  // drop "b"
  core::Config config;
  config.topology_levels = r.fleet.levels;
  absl::StatusOr<ReplayResult> result =
      Replay(config, r.fleet, r.workload, ReplayOptions{});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("\"b\" is not a queue"));
  // A parent queue takes gangs too, as in the daemon.
  r.workload.jobs[1].team = "org";
  r.workload.jobs[2].team = "org";
  r.workload.queues = MakeSmallReplay().workload.queues;
  EXPECT_TRUE(Replay(config, r.fleet, r.workload, ReplayOptions{}).ok());
}

}  // namespace
}  // namespace phalanx::bench
