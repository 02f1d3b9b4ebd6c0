// The CSV of `phalanxctl history export` read back by the simulator's own
// trace parser (bench/sim/trace.h): what a replay of it submits is what
// the daemon exported.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/sim/trace.h"
#include "clients/ctl_history.h"
#include "gtest/gtest.h"

namespace phalanx::ctl {
namespace {

v1::HistoryRecord Record(const std::string& id, const std::string& queue,
                         int64_t submit_seconds, int pods, int gpus,
                         int64_t run_millis, int priority) {
  v1::HistoryRecord record;
  record.set_gang_id(id);
  record.set_queue(queue);
  record.set_priority(priority);
  record.set_state(v1::GANG_STATE_SUCCEEDED);
  v1::PodSet* set = record.add_pod_sets();
  set->set_count(pods);
  set->set_gpus(gpus);
  record.mutable_submit_time()->set_seconds(submit_seconds);
  record.mutable_first_admit_time()->set_seconds(submit_seconds + 1);
  record.mutable_run_time()->set_seconds(run_millis / 1000);
  record.mutable_run_time()->set_nanos((run_millis % 1000) * 1'000'000);
  record.set_attempts(1);
  return record;
}

TEST(HistoryTraceTest, TheSimulatorReadsTheExportedCsv) {
  std::vector<v1::HistoryRecord> records = {
      Record("g-000001", "llm", 1'700'000'000, 2, 8, 90'250, 5),
      Record("g-000002", "team \"x\", batch", 1'700'000'003, 1, 4, 1'000, 0),
  };
  v1::PodSet* second = records[0].add_pod_sets();
  second->set_count(1);
  second->set_gpus(2);
  second->add_gpu_models("H200");
  second->add_gpu_models("H100");
  second->mutable_topology()->set_mode(v1::TOPOLOGY_MODE_REQUIRED);
  second->mutable_topology()->set_level("rack");
  records[0].mutable_estimated_runtime()->set_seconds(3600);
  // Still running at the export: its run so far, not complete.
  records[1].set_state(v1::GANG_STATE_RUNNING);
  for (bool labels : {false, true}) {
    std::string csv = HistoryCsvHeader(labels);
    for (const v1::HistoryRecord& record : records) {
      csv += HistoryCsvRow(record, labels);
    }
    absl::StatusOr<std::vector<bench::TraceJob>> jobs = bench::ParseTrace(csv);
    ASSERT_TRUE(jobs.ok()) << jobs.status() << "\n" << csv;
    ASSERT_EQ(jobs->size(), 2u);
    const bench::TraceJob& first = (*jobs)[0];
    EXPECT_EQ(first.submit_time, absl::FromUnixSeconds(1'700'000'000));
    EXPECT_EQ(first.duration, absl::Milliseconds(90'250));
    EXPECT_EQ(first.gpus, 18);
    EXPECT_EQ(first.team, "llm");
    EXPECT_EQ(first.priority, 5);
    EXPECT_FALSE(first.checkpoint_interval.has_value());
    EXPECT_EQ(first.gang_id, "g-000001");
    ASSERT_EQ(first.pod_sets.size(), 2u);
    EXPECT_EQ(first.pod_sets[0].count, 2);
    EXPECT_EQ(first.pod_sets[0].gpus, 8);
    EXPECT_TRUE(first.pod_sets[0].gpu_models.empty());
    EXPECT_EQ(first.pod_sets[1].gpu_models,
              (std::vector<std::string>{"H200", "H100"}));
    EXPECT_EQ(first.pod_sets[1].topology, "required:rack");
    EXPECT_EQ(first.recorded_start, absl::FromUnixSeconds(1'700'000'001));
    EXPECT_TRUE(first.complete);
    EXPECT_EQ(first.declared_estimate, absl::Hours(1));
    EXPECT_FALSE(first.declared_max_runtime.has_value());
    const bench::TraceJob& second_job = (*jobs)[1];
    EXPECT_EQ(second_job.team, "team \"x\", batch");
    EXPECT_EQ(second_job.gpus, 4);
    EXPECT_EQ(second_job.duration, absl::Seconds(1));
    EXPECT_FALSE(second_job.complete);
  }
}

TEST(HistoryTraceTest, AGangThatNeverStartedIsReadOrLeftOut) {
  v1::HistoryRecord pending =
      Record("g-000003", "llm", 1'700'000'010, 1, 8, 0, 0);
  pending.set_state(v1::GANG_STATE_PENDING);
  pending.clear_first_admit_time();
  pending.clear_run_time();
  v1::HistoryRecord cancelled = pending;
  cancelled.set_gang_id("g-000004");
  cancelled.set_state(v1::GANG_STATE_CANCELLED);
  cancelled.mutable_finish_time()->set_seconds(1'700'000'020);
  const std::string csv = HistoryCsvHeader(false) +
                          HistoryCsvRow(pending, false) +
                          HistoryCsvRow(cancelled, false);
  absl::StatusOr<std::vector<bench::TraceJob>> jobs = bench::ParseTrace(csv);
  ASSERT_TRUE(jobs.ok()) << jobs.status() << "\n" << csv;
  // The pending gang waits in the replay; the cancelled one is left out.
  ASSERT_EQ(jobs->size(), 1u) << csv;
  EXPECT_EQ((*jobs)[0].gang_id, "g-000003");
  EXPECT_FALSE((*jobs)[0].complete);
  EXPECT_FALSE((*jobs)[0].recorded_start.has_value());
}

}  // namespace
}  // namespace phalanx::ctl
