#include "bench/sim/trace.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::Time At(int y, int mo, int d, int h, int mi, int s) {
  return absl::FromCivil(absl::CivilSecond(y, mo, d, h, mi, s),
                         absl::UTCTimeZone());
}

TEST(ParseTraceTest, ReadsPhillyRowsInFileOrderEvenWhenUnsorted) {
  auto jobs = ParseTrace(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
      "2017-09-29 07:58:32,860662.0,8,6885296.0,6c71a0\n"
      "\n");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].line, 2);
  EXPECT_EQ((*jobs)[0].submit_time, At(2017, 10, 9, 7, 1, 55));
  EXPECT_EQ((*jobs)[0].duration, absl::Seconds(66));
  EXPECT_EQ((*jobs)[0].gpus, 1);
  EXPECT_EQ((*jobs)[0].team, "11cb48");
  EXPECT_EQ((*jobs)[0].priority, 0);
  EXPECT_EQ((*jobs)[1].line, 3);
  EXPECT_EQ((*jobs)[1].submit_time, At(2017, 9, 29, 7, 58, 32));
  EXPECT_EQ((*jobs)[1].gpus, 8);
}

TEST(ParseTraceTest, ReadsTheOptionalPriorityColumnInAnyPosition) {
  auto jobs = ParseTrace(
      "priority,cluster,num_gpus,duration,timestamp\n"
      "2,a,16,10,100\n"
      ",b,1,5,200\n");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ((*jobs)[0].priority, 2);
  EXPECT_EQ((*jobs)[0].submit_time, absl::FromUnixSeconds(100));
  EXPECT_EQ((*jobs)[1].priority, 0);  // empty = default
}

TEST(ParseTraceTest, ReadsTheOptionalCheckpointIntervalColumn) {
  auto jobs = ParseTrace(
      "timestamp,duration,num_gpus,cluster,checkpoint_interval_s\n"
      "100,10,1,a,600\n"
      "100,10,1,a,0\n"
      "100,10,1,a,\n");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ((*jobs)[0].checkpoint_interval, absl::Minutes(10));
  EXPECT_EQ((*jobs)[1].checkpoint_interval, absl::ZeroDuration());  // never
  EXPECT_FALSE((*jobs)[2].checkpoint_interval.has_value());  // the default
  auto bad = ParseTrace(
      "timestamp,duration,num_gpus,cluster,checkpoint_interval_s\n"
      "100,10,1,a,-1\n");
  EXPECT_THAT(bad.status().message(),
              HasSubstr("line 2: checkpoint_interval_s"));
}

TEST(ParseTraceTest, IgnoresUnknownColumnsAndHandlesQuotesAndCrLf) {
  auto jobs = ParseTrace(
      "user,timestamp,duration,num_gpus,cluster,note\r\n"
      "alice,2017-10-01 00:00:00,60,4,vc1,\"a, \"\"quoted\"\" note\"\r\n");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].team, "vc1");
  EXPECT_EQ((*jobs)[0].gpus, 4);
}

struct BadRow {
  std::string name;
  std::string row;
  std::string expected;
};

class MalformedRowTest : public ::testing::TestWithParam<BadRow> {};

TEST_P(MalformedRowTest, NamesTheLineAndColumn) {
  auto jobs = ParseTrace(
      "timestamp,duration,num_gpus,cluster,priority\n"
      "2017-10-01 00:00:00,60,1,a,0\n"
      "\n" +
      GetParam().row + "\n");
  ASSERT_FALSE(jobs.ok());
  EXPECT_EQ(jobs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(jobs.status().message(), HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    Rows, MalformedRowTest,
    ::testing::Values(
        BadRow{"BadTimestamp", "2017-13-45 99:00:00,60,1,a,0",
               "line 4: timestamp"},
        BadRow{"NegativeDuration", "2017-10-01 00:00:00,-5,1,a,0",
               "line 4: duration"},
        BadRow{"ZeroGpus", "2017-10-01 00:00:00,60,0,a,0", "line 4: num_gpus"},
        BadRow{"FractionalGpus", "2017-10-01 00:00:00,60,1.5,a,0",
               "line 4: num_gpus"},
        BadRow{"EmptyCluster", "2017-10-01 00:00:00,60,1,,0",
               "line 4: cluster"},
        BadRow{"BadPriority", "2017-10-01 00:00:00,60,1,a,high",
               "line 4: priority"},
        BadRow{"TooFewFields", "2017-10-01 00:00:00,60", "line 4: 2 fields"}),
    [](const auto& info) { return info.param.name; });

// The columns `phalanxctl history export` adds.
constexpr char kExportHeader[] =
    "timestamp,duration,num_gpus,cluster,pods,gpus_per_pod,gpu_model,"
    "topology,start,complete,estimated_runtime_s,max_runtime_s,gang_id,"
    "state\n";

TEST(ParseTraceTest, ReadsTheColumnsOfAnExportedHistory) {
  auto jobs = ParseTrace(std::string(kExportHeader) +
                         "100,3600,34,research,4;1,8;2,H100|H200;,"
                         "Required:rack;,160,1,7200,,g-1,SUCCEEDED\n"
                         "200,,8,research,1,8,,,,0,,1800,g-2,PENDING\n"
                         "250,,8,research,1,8,,,,0,,,g-3,CANCELLED\n"
                         "300,50,8,infra,,,,,,,,,,\n");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 3u);  // g-3 never started and never will
  const TraceJob& first = (*jobs)[0];
  EXPECT_EQ(first.gang_id, "g-1");
  ASSERT_EQ(first.pod_sets.size(), 2u);
  EXPECT_EQ(first.pod_sets[0].count, 4);
  EXPECT_EQ(first.pod_sets[0].gpus, 8);
  EXPECT_THAT(first.pod_sets[0].gpu_models, ElementsAre("H100", "H200"));
  EXPECT_EQ(first.pod_sets[0].topology, "required:rack");
  EXPECT_EQ(first.pod_sets[1].count, 1);
  EXPECT_EQ(first.pod_sets[1].gpus, 2);
  EXPECT_TRUE(first.pod_sets[1].gpu_models.empty());
  EXPECT_EQ(first.pod_sets[1].topology, "");
  EXPECT_EQ(first.recorded_start, absl::FromUnixSeconds(160));
  EXPECT_TRUE(first.complete);
  EXPECT_EQ(first.declared_estimate, absl::Hours(2));
  EXPECT_FALSE(first.declared_max_runtime.has_value());
  const TraceJob& open = (*jobs)[1];
  EXPECT_FALSE(open.complete);
  EXPECT_EQ(open.duration, absl::ZeroDuration());
  EXPECT_FALSE(open.recorded_start.has_value());
  EXPECT_TRUE((*jobs)[2].pod_sets.empty());  // derived from num_gpus
  EXPECT_TRUE((*jobs)[2].complete);
}

TEST(ResolveOpenRunsTest, AnOpenRunLastsWhatItWasExpectedToRun) {
  std::vector<TraceJob> jobs(4);
  jobs[0].duration = absl::Hours(1);  // complete: unchanged
  jobs[1].complete = false;
  jobs[1].declared_max_runtime = absl::Hours(3);
  jobs[2].complete = false;
  jobs[2].duration = absl::Hours(5);  // ran longer than its estimate
  jobs[2].declared_estimate = absl::Hours(2);
  jobs[3].complete = false;  // declared nothing
  ResolveOpenRuns(jobs, absl::Hours(24));
  EXPECT_EQ(jobs[0].duration, absl::Hours(1));
  EXPECT_EQ(jobs[1].duration, absl::Hours(3));
  EXPECT_EQ(jobs[2].duration, absl::Hours(5));
  EXPECT_EQ(jobs[3].duration, absl::Hours(24));
}

TEST(ParseTraceTest, ABadExportedColumnNamesTheLineAndColumn) {
  const std::pair<const char*, const char*> cases[] = {
      {"1,60,8,a,2,,,,,,,,,\n", "line 2: gpus_per_pod"},
      {"1,60,8,a,2,8,,,,,,,,\n", "line 2: pods: \"2\" times gpus_per_pod"},
      {"1,60,8,a,1;1,8,,,,,,,,\n", "line 2: gpus_per_pod: \"8\" has 1"},
      {"1,60,16,a,2,8,,rack,,,,,,\n", "line 2: topology: \"rack\""},
      {"1,,8,a,,,,,,1,,,,\n", "line 2: duration"},
      {"1,60,8,a,,,,,,2,,,,\n", "line 2: complete"},
      {"1,60,8,a,,,,,yesterday,,,,,\n", "line 2: start"},
      {"1,60,8,a,,,,,,,0,,,\n", "line 2: estimated_runtime_s"}};
  for (const auto& [row, expected] : cases) {
    auto jobs = ParseTrace(std::string(kExportHeader) + row);
    ASSERT_FALSE(jobs.ok()) << row;
    EXPECT_THAT(jobs.status().message(), HasSubstr(expected)) << row;
  }
}

TEST(ParseTraceTest, MissingRequiredColumnIsReportedOnLineOne) {
  auto jobs = ParseTrace("timestamp,duration,cluster\n1,2,a\n");
  ASSERT_FALSE(jobs.ok());
  EXPECT_THAT(jobs.status().message(),
              HasSubstr("line 1: missing column \"num_gpus\""));
}

TEST(ReadTraceTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadTrace("/nonexistent/trace.csv").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(SplitCsvLineTest, SplitsQuotedFields) {
  EXPECT_THAT(SplitCsvLine("a,\"b,c\",,\"d\"\"e\"\r"),
              ElementsAre("a", "b,c", "", "d\"e"));
}

}  // namespace
}  // namespace phalanx::bench
