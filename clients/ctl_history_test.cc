#include "clients/ctl_history.h"

#include <string>
#include <variant>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::ctl {
namespace {

using ::testing::HasSubstr;

// A gang of 2 pods × 8 H100 GPUs in one rack, queue "llm", submitted at
// 1700000000.5, started 10 s later, preempted once, succeeded after 90.25 s
// of run time.
v1::HistoryRecord Finished() {
  v1::HistoryRecord record;
  record.set_gang_id("g-000001");
  record.set_queue("llm");
  record.set_priority(5);
  record.set_state(v1::GANG_STATE_SUCCEEDED);
  v1::PodSet* set = record.add_pod_sets();
  set->set_count(2);
  set->set_gpus(8);
  set->add_gpu_models("H100");
  set->mutable_topology()->set_mode(v1::TOPOLOGY_MODE_REQUIRED);
  set->mutable_topology()->set_level("rack");
  record.mutable_submit_time()->set_seconds(1'700'000'000);
  record.mutable_submit_time()->set_nanos(500'000'000);
  record.mutable_first_admit_time()->set_seconds(1'700'000'010);
  record.mutable_finish_time()->set_seconds(1'700'000'200);
  record.mutable_run_time()->set_seconds(90);
  record.mutable_run_time()->set_nanos(250'000'000);
  record.set_attempts(2);
  record.set_preemptions(1);
  record.mutable_estimated_runtime()->set_seconds(3600);
  return record;
}

TEST(HistoryCsvTest, TheHeaderStartsWithTheSimulatorsColumns) {
  EXPECT_EQ(HistoryCsvHeader(false),
            "timestamp,duration,num_gpus,cluster,priority,"
            "checkpoint_interval_s,complete,gang_id,state,pods,gpus_per_pod,"
            "gpu_model,topology,start,finish,attempts,preemptions,"
            "estimated_runtime_s,max_runtime_s\n");
  EXPECT_THAT(HistoryCsvHeader(true), HasSubstr(",max_runtime_s,labels\n"));
}

TEST(HistoryCsvTest, AFinishedGang) {
  EXPECT_EQ(HistoryCsvRow(Finished(), false),
            "1700000000.5,90.25,16,llm,5,,1,g-000001,SUCCEEDED,2,8,H100,"
            "required:rack,1700000010,1700000200,2,1,3600,\n");
}

TEST(HistoryCsvTest, TimesBefore1970KeepTheirFraction) {
  v1::HistoryRecord record = Finished();
  record.mutable_submit_time()->set_seconds(-2);  // -2 s + 0.5 s
  EXPECT_THAT(HistoryCsvRow(record, false), ::testing::StartsWith("-1.5,"));
  record.mutable_submit_time()->set_seconds(-1);
  EXPECT_THAT(HistoryCsvRow(record, false), ::testing::StartsWith("-0.5,"));
  record.mutable_submit_time()->set_nanos(0);
  EXPECT_THAT(HistoryCsvRow(record, false), ::testing::StartsWith("-1,"));
}

TEST(HistoryCsvTest, ARunningGangIsNotComplete) {
  v1::HistoryRecord record = Finished();
  record.set_state(v1::GANG_STATE_RUNNING);
  record.clear_finish_time();
  EXPECT_EQ(HistoryCsvRow(record, false),
            "1700000000.5,90.25,16,llm,5,,0,g-000001,RUNNING,2,8,H100,"
            "required:rack,1700000010,,2,1,3600,\n");
}

TEST(HistoryCsvTest, AGangThatNeverStartedHasNoDuration) {
  v1::HistoryRecord record = Finished();
  record.set_state(v1::GANG_STATE_CANCELLED);
  record.clear_first_admit_time();
  record.clear_run_time();
  record.set_attempts(0);
  record.set_preemptions(0);
  EXPECT_EQ(HistoryCsvRow(record, false),
            "1700000000.5,,16,llm,5,,0,g-000001,CANCELLED,2,8,H100,"
            "required:rack,,1700000200,0,0,3600,\n");
}

TEST(HistoryCsvTest, PodSetsAreListedOnePerSet) {
  v1::HistoryRecord record = Finished();
  v1::PodSet* second = record.add_pod_sets();
  second->set_count(1);
  second->set_gpus(4);
  second->add_gpu_models("H200");
  second->add_gpu_models("H100");
  second->mutable_topology()->set_mode(v1::TOPOLOGY_MODE_PREFERRED);
  second->mutable_topology()->set_level("block");
  v1::PodSet* third = record.add_pod_sets();  // any model, unconstrained
  third->set_count(3);
  third->set_gpus(1);
  EXPECT_THAT(HistoryCsvRow(record, false),
              HasSubstr(",23,llm,5,"));  // 16 + 4 + 3 GPUs
  EXPECT_THAT(HistoryCsvRow(record, false),
              HasSubstr(",SUCCEEDED,2;1;3,8;4;1,H100;H200|H100;,"
                        "required:rack;preferred:block;,"));
}

TEST(HistoryCsvTest, FieldsAreQuotedWhereCsvNeedsIt) {
  v1::HistoryRecord record = Finished();
  record.set_queue("team \"x\", batch");
  (*record.mutable_labels())["b"] = "2";
  (*record.mutable_labels())["a"] = "1,5";
  const std::string row = HistoryCsvRow(record, true);
  EXPECT_THAT(row, HasSubstr(",\"team \"\"x\"\", batch\",5,"));
  EXPECT_THAT(row, HasSubstr(",3600,,\"a=1,5;b=2\"\n"));
}

TEST(HistorySinceTest, DaysDurationsAndTimes) {
  auto days = ParseSince("7d");
  ASSERT_TRUE(days.ok());
  EXPECT_EQ(std::get<absl::Duration>(*days), absl::Hours(168));
  auto hours = ParseSince("36h");
  ASSERT_TRUE(hours.ok());
  EXPECT_EQ(std::get<absl::Duration>(*hours), absl::Hours(36));
  auto time = ParseSince("2026-12-01T00:00:00Z");
  ASSERT_TRUE(time.ok());
  EXPECT_EQ(std::get<absl::Time>(*time), absl::FromUnixSeconds(1796083200));
  for (const char* bad : {"", "d", "-1d", "0d", "yesterday", "7x"}) {
    auto parsed = ParseSince(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    if (!parsed.ok()) {
      EXPECT_THAT(parsed.status().message(), HasSubstr("RFC3339")) << bad;
    }
  }
}

TEST(HistoryRequestTest, SinceIsResolvedAgainstNow) {
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  HistoryOptions options;
  v1::ExportHistoryRequest request = BuildHistoryRequest(options, now);
  EXPECT_FALSE(request.has_since());
  EXPECT_EQ(request.page_size(), kMaxHistoryPageSize);
  EXPECT_FALSE(request.include_labels());
  options.since = absl::Hours(24);
  options.include_labels = true;
  request = BuildHistoryRequest(options, now);
  EXPECT_EQ(request.since().seconds(), 1'700'000'000 - 86'400);
  EXPECT_TRUE(request.include_labels());
  options.since = absl::FromUnixSeconds(5);
  EXPECT_EQ(BuildHistoryRequest(options, now).since().seconds(), 5);
}

}  // namespace
}  // namespace phalanx::ctl
