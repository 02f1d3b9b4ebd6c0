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
