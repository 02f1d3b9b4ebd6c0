#include "bench/sim/compare.h"

#include "bench/sim/hold_tracker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

absl::Time T(double hours) {
  return absl::FromUnixSeconds(1700000000) + absl::Hours(hours);
}

TEST(WaitedLongerUnderATest, LargestDifferenceFirstOnlyJobsFinishedUnderBoth) {
  const JobWaits a = {absl::Hours(5), absl::Hours(9), std::nullopt,
                      absl::Hours(1), absl::Hours(4)};
  const JobWaits b = {absl::Hours(1), absl::Hours(1), absl::Hours(0),
                      absl::Hours(2), absl::Hours(0)};
  // Job 0 and 4 both wait 4 h more: the lower index first. Job 3 waited
  // less under A, job 2 did not finish under A.
  EXPECT_THAT(WaitedLongerUnderA(a, b, 10), ElementsAre(1, 0, 4));
  EXPECT_THAT(WaitedLongerUnderA(a, b, 2), ElementsAre(1, 0));
  EXPECT_THAT(WaitedLongerUnderA(a, b, 0), ElementsAre());
}

TEST(CompareCsvTest, OneRowAJobEmptyWhereNotFinished) {
  TraceJob job;
  job.line = 7;
  job.team = "t";
  job.gpus = 64;
  job.priority = 1;
  job.submit_time = T(2);
  const std::string csv =
      CompareCsv("x", "y", {job, job}, {absl::Hours(3), std::nullopt},
                 {absl::Hours(1), absl::Hours(1)}, T(0));
  EXPECT_EQ(csv,
            "job_line,team,gpus,priority,submit_hours,wait_x_hours,"
            "wait_y_hours,more_under_x_hours\n"
            "7,t,64,1,2.000000,3.000,1.000,2.000\n"
            "7,t,64,1,2.000000,,1.000,\n");
}

TEST(HoldTrackerTest, ChargesEachHolderOfASpellUntilTheNextObservation) {
  HoldTracker tracker({4});
  EXPECT_TRUE(tracker.Tracks(4));
  EXPECT_FALSE(tracker.Tracks(5));
  tracker.Observe(4, T(0), {"NO_FIT, planned ahead: job 1"});
  tracker.Observe(4, T(2),
                  {"RESERVED, waiting for job 2 to end",
                   "RESERVED, waiting for job 3 to end"});
  tracker.Leave(4, T(3));
  tracker.Leave(4, T(9));  // already left: nothing more
  tracker.Observe(5, T(0), {"untracked"});
  const std::vector<HoldReport> reports = tracker.Finish();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].job, 4);
  EXPECT_THAT(
      reports[0].held,
      ElementsAre(Pair("NO_FIT, planned ahead: job 1", absl::Hours(2)),
                  Pair("RESERVED, waiting for job 2 to end", absl::Hours(1)),
                  Pair("RESERVED, waiting for job 3 to end", absl::Hours(1))));
}

TEST(HoldTrackerTest, CountsPreemptionsAndGangsAdmittedAhead) {
  HoldTracker tracker({0});
  tracker.Preempted(0, 3);
  tracker.Preempted(0, 3);
  tracker.Passed(0, "b", "same", 8, absl::Hours(2));
  tracker.Passed(0, "b", "same", 64, absl::Hours(1));
  const HoldReport report = tracker.Finish()[0];
  EXPECT_THAT(report.preempted_by, ElementsAre(Pair(3, 2)));
  const PassedTally& tally = report.passed_by.at({"b", "same"});
  EXPECT_EQ(tally.gangs, 2);
  EXPECT_EQ(tally.gpus, 72);
  EXPECT_EQ(tally.largest, 64);
  EXPECT_DOUBLE_EQ(tally.gpu_hours, 80);
}

TEST(CompareMarkdownTest, NamesTheJobItsWaitsAndLongestHolderFirst) {
  TraceJob job;
  job.team = "t";
  job.gpus = 512;
  HoldReport hold;
  hold.job = 0;
  hold.held["short"] = absl::Hours(1);
  hold.held["long"] = absl::Hours(5);
  hold.preempted_by[-1] = 1;
  HoldReport under_y;
  under_y.job = 0;
  under_y.held["QUOTA"] = absl::Hours(2);
  const std::string md =
      CompareMarkdown("x", "y", {job}, {absl::Hours(9)}, {absl::Hours(2)},
                      {hold}, {under_y}, 1);
  EXPECT_THAT(md, HasSubstr("- job 0 (t, 512 GPUs, priority 0): waited "
                            "9.000 h under x, 2.000 h under y\n"
                            "  - under x:\n"
                            "    - 5.0 h: long\n"
                            "    - preempted 1× by a gang outside the trace\n"
                            "  - under y:\n"
                            "    - 2.0 h: QUOTA\n"));
  EXPECT_THAT(md, ::testing::Not(HasSubstr("short")));
}

}  // namespace
}  // namespace phalanx::bench
