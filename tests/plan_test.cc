// The plan through the API against a real phalanxd: behind a fleet full of
// gangs with exact run times, every pending gang gets a planned start, a
// domain and a rank (GetGang, ListGangs, ExplainGang), and starts at it
// when every gang runs as long as it said.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

// DemoConfigJson's cycle interval.
constexpr absl::Duration kCycle = absl::Milliseconds(200);
// How late this test's launchers may report a gang's end, on a loaded
// machine (they poll every kPoll).
constexpr absl::Duration kReportSlack = absl::Milliseconds(1500);
constexpr absl::Duration kPoll = absl::Milliseconds(20);

absl::Time TimeOf(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

// `pods` pods of 8 GPUs (whole demo nodes) in queue "a", expected to run
// `runtime`.
v1::SubmitGangRequest Timed(int pods, absl::Duration runtime) {
  v1::SubmitGangRequest request = SubmitRequest("a", pods, 8);
  request.mutable_spec()->mutable_estimated_runtime()->set_seconds(
      absl::ToInt64Seconds(runtime));
  return request;
}

class PlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = StartDemoDaemon();
    ASSERT_TRUE(daemon_->Start()) << daemon_->output();
    scheduler_ = daemon_->Scheduler();
    // A plan made again every second, so a test does not wait the default
    // 30 s for a gang that came after the last one.
    v1::UpdateConfigRequest update;
    update.mutable_config()
        ->mutable_planning()
        ->mutable_interval()
        ->set_seconds(1);
    update.mutable_update_mask()->add_paths("planning.interval");
    grpc::ClientContext context;
    v1::Config config;
    grpc::Status status =
        daemon_->Admin()->UpdateConfig(&context, update, &config);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(config.planning().interval().seconds(), 1);
  }

  v1::ListGangsResponse List() {
    v1::ListGangsRequest request;
    request.set_page_size(1000);
    grpc::ClientContext context;
    v1::ListGangsResponse response;
    grpc::Status status = scheduler_->ListGangs(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  v1::ExplainGangResponse Explain(const std::string& id) {
    v1::ExplainGangRequest request;
    request.set_gang_id(id);
    grpc::ClientContext context;
    v1::ExplainGangResponse response;
    grpc::Status status = scheduler_->ExplainGang(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  void Report(const std::string& id, v1::GangState state) {
    v1::ReportGangRequest request;
    request.set_gang_id(id);
    request.set_state(state);
    grpc::ClientContext context;
    v1::ReportGangResponse response;
    grpc::Status status = scheduler_->ReportGang(&context, request, &response);
    EXPECT_TRUE(status.ok()) << id << ": " << status.error_message();
  }

  // Plays every gang's launcher for one poll: an ADMITTED gang is reported
  // RUNNING, a RUNNING one SUCCEEDED once its estimated run time since its
  // admission has passed, so each runs exactly as long as it said.
  void PlayLaunchers(const v1::ListGangsResponse& listed) {
    for (const v1::Gang& gang : listed.gangs()) {
      if (gang.state() == v1::GANG_STATE_ADMITTED) {
        Report(gang.id(), v1::GANG_STATE_RUNNING);
      } else if (gang.state() == v1::GANG_STATE_RUNNING &&
                 absl::Now() >=
                     TimeOf(gang.admit_time()) +
                         absl::Seconds(
                             gang.spec().estimated_runtime().seconds())) {
        Report(gang.id(), v1::GANG_STATE_SUCCEEDED);
      }
    }
  }

  std::vector<v1::Gang> FillFleet(absl::Duration first);
  std::vector<std::string> SubmitWaiting(int count);
  std::map<std::string, v1::Gang> AwaitPlanned(
      const std::vector<std::string>& ids);

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
};

// The demo fleet's 8 nodes, full: four gangs of 2 nodes each, expected to
// run `first`, `first` + 1 s, + 2 s and + 3 s after their admission,
// reported RUNNING. Returns them as admitted.
std::vector<v1::Gang> PlanTest::FillFleet(absl::Duration first) {
  std::vector<v1::Gang> running;
  for (int i = 0; i < 4; ++i) {
    running.push_back(
        SubmitOk(*scheduler_, Timed(2, first + absl::Seconds(i))));
    EXPECT_EQ(running.back().state(), v1::GANG_STATE_ADMITTED)
        << running.back().reason();
    Report(running.back().id(), v1::GANG_STATE_RUNNING);
  }
  return running;
}

// `count` gangs of 2 nodes expected to run a minute, PENDING behind a full
// fleet; returns their ids.
std::vector<std::string> PlanTest::SubmitWaiting(int count) {
  std::vector<std::string> waiting;
  for (int i = 0; i < count; ++i) {
    const v1::Gang gang = SubmitOk(*scheduler_, Timed(2, absl::Seconds(60)));
    EXPECT_EQ(gang.state(), v1::GANG_STATE_PENDING);
    waiting.push_back(gang.id());
  }
  return waiting;
}

// Each of `ids` as GetGang first returns it PLANNED, polling for at most
// 5 s; those never planned are missing.
std::map<std::string, v1::Gang> PlanTest::AwaitPlanned(
    const std::vector<std::string>& ids) {
  std::map<std::string, v1::Gang> planned;
  for (int poll = 0; poll < 250 && planned.size() < ids.size(); ++poll) {
    for (const std::string& id : ids) {
      const v1::Gang gang = GetOk(*scheduler_, id);
      if (gang.plan_status() == v1::PLAN_STATUS_PLANNED) {
        planned.emplace(id, gang);
      }
    }
    absl::SleepFor(kPoll);
  }
  return planned;
}

// The i-th waiting gang takes the nodes the i-th running gang frees, at
// its admission plus its estimated run time.
void ExpectPlannedWhereTheRunningEnd(
    const std::vector<v1::Gang>& running,
    const std::vector<std::string>& waiting,
    const std::map<std::string, v1::Gang>& planned) {
  for (size_t i = 0; i < waiting.size(); ++i) {
    const v1::Gang& gang = planned.at(waiting[i]);
    SCOPED_TRACE(gang.DebugString());
    ASSERT_TRUE(gang.has_estimated_start());
    EXPECT_FALSE(gang.planned_domain().empty());
    EXPECT_EQ(gang.plan_rank(), static_cast<int>(i) + 1);
    const absl::Time frees =
        TimeOf(running[i].admit_time()) +
        absl::Seconds(running[i].spec().estimated_runtime().seconds());
    EXPECT_LE(absl::AbsDuration(TimeOf(gang.estimated_start()) - frees),
              absl::Seconds(1));
  }
}

TEST_F(PlanTest, PendingGangsArePlannedAndStartAtTheirEstimate) {
  const std::vector<v1::Gang> running = FillFleet(absl::Seconds(4));
  const std::vector<std::string> waiting = SubmitWaiting(3);
  ASSERT_EQ(AwaitPlanned(waiting).size(), waiting.size()) << daemon_->output();
  // Estimates from a plan made after they arrived: one planning interval
  // and a cycle later, the plan has been made again from scratch.
  absl::SleepFor(absl::Seconds(1) + 2 * kCycle);
  const std::map<std::string, v1::Gang> planned = AwaitPlanned(waiting);
  ASSERT_EQ(planned.size(), waiting.size());
  ExpectPlannedWhereTheRunningEnd(running, waiting, planned);
  // ListGangs and ExplainGang say the same; running gangs have no place.
  const v1::ListGangsResponse listed = List();
  for (const v1::Gang& gang : listed.gangs()) {
    if (gang.state() != v1::GANG_STATE_PENDING) {
      EXPECT_EQ(gang.plan_status(), v1::PLAN_STATUS_NOT_PENDING) << gang.id();
      EXPECT_FALSE(gang.has_estimated_start()) << gang.id();
      continue;
    }
    EXPECT_EQ(gang.plan_status(), v1::PLAN_STATUS_PLANNED) << gang.id();
    EXPECT_EQ(gang.plan_rank(), planned.at(gang.id()).plan_rank());
  }
  const v1::ExplainGangResponse explained = Explain(waiting[0]);
  EXPECT_EQ(explained.gang().plan_status(), v1::PLAN_STATUS_PLANNED);
  EXPECT_EQ(explained.gang().plan_rank(), 1);
  EXPECT_TRUE(explained.has_estimated_start());
  EXPECT_EQ(explained.estimated_start().SerializeAsString(),
            explained.gang().estimated_start().SerializeAsString());

  // Every gang runs exactly as long as it said: each waiting gang starts
  // within a cycle (plus the cycle interval and the report's slack) of its
  // estimate.
  std::map<std::string, absl::Time> started;
  const absl::Time deadline = absl::Now() + absl::Seconds(40);
  for (int poll = 0;
       poll < 2000 && started.size() < waiting.size() && absl::Now() < deadline;
       ++poll) {
    const v1::ListGangsResponse now = List();
    PlayLaunchers(now);
    for (const v1::Gang& gang : now.gangs()) {
      if (planned.contains(gang.id()) && gang.has_admit_time()) {
        started.emplace(gang.id(), TimeOf(gang.admit_time()));
      }
    }
    absl::SleepFor(kPoll);
  }
  ASSERT_EQ(started.size(), waiting.size()) << List().DebugString();
  for (const std::string& id : waiting) {
    const absl::Time estimate = TimeOf(planned.at(id).estimated_start());
    const absl::Duration off = started[id] - estimate;
    std::printf("%s started %+.3f s from its estimate\n", id.c_str(),
                absl::ToDoubleSeconds(off));
    EXPECT_LE(absl::AbsDuration(off), 2 * kCycle + kReportSlack)
        << id << " estimated " << absl::FormatTime(estimate) << ", started "
        << absl::FormatTime(started[id]);
  }
}

// A gang that arrives between two plans is planned on the capacity in
// force: the gangs admitted since the last plan hold theirs in it.
TEST_F(PlanTest, AGangArrivingBetweenPlansIsPlannedOnTheCapacityInForce) {
  const std::vector<v1::Gang> running = FillFleet(absl::Seconds(4));
  const std::vector<std::string> waiting = SubmitWaiting(3);
  const std::map<std::string, v1::Gang> planned = AwaitPlanned(waiting);
  ASSERT_EQ(planned.size(), waiting.size()) << daemon_->output();
  ExpectPlannedWhereTheRunningEnd(running, waiting, planned);
}

}  // namespace
}  // namespace phalanx::testing
