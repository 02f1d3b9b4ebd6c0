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
  const std::vector<v1::HistoryRecord> records = {
      Record("g-000001", "llm", 1'700'000'000, 2, 8, 90'250, 5),
      Record("g-000002", "team \"x\", batch", 1'700'000'003, 1, 4, 1'000, 0),
  };
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
    EXPECT_EQ(first.gpus, 16);
    EXPECT_EQ(first.team, "llm");
    EXPECT_EQ(first.priority, 5);
    EXPECT_FALSE(first.checkpoint_interval.has_value());
    const bench::TraceJob& second = (*jobs)[1];
    EXPECT_EQ(second.team, "team \"x\", batch");
    EXPECT_EQ(second.gpus, 4);
    EXPECT_EQ(second.duration, absl::Seconds(1));
  }
}

}  // namespace
}  // namespace phalanx::ctl
