// A recorded history replayed: the real phalanxd runs a small contended
// workload (gangs finished by the test as a launcher would), phalanxctl
// exports its history, configuration, queues and fleet, and phalanx-sim
// replays that history under the daemon's own configuration. The replay
// must start every gang in the recorded order and within a bound of its
// recorded start (the daemon admits on its next cycle, the replay at once).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A gang of the workload: its queue, pods of 8 GPUs, how long the test
// lets it run once admitted, and its declared estimate (0 = the run).
struct Planned {
  std::string queue;
  int pods;
  absl::Duration run;
  absl::Duration estimate = absl::ZeroDuration();
};

class HistoryReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = StartDemoDaemon();
    ASSERT_TRUE(daemon_->Start()) << daemon_->output();
    scheduler_ = daemon_->Scheduler();
  }

  std::string Submit(const Planned& gang, int index) {
    v1::SubmitGangRequest request = SubmitRequest(
        gang.queue, gang.pods, 8, "", absl::StrCat("replay-", index));
    *request.mutable_spec()->mutable_estimated_runtime() =
        google::protobuf::util::TimeUtil::MillisecondsToDuration(
            absl::ToInt64Milliseconds(gang.estimate > absl::ZeroDuration()
                                          ? gang.estimate
                                          : gang.run));
    grpc::ClientContext context;
    v1::SubmitGangResponse created;
    grpc::Status status = scheduler_->SubmitGang(&context, request, &created);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return created.gang().id();
  }

  // The gang's state and, once admitted, when (the daemon's clock).
  v1::Gang Get(const std::string& id) {
    grpc::ClientContext context;
    v1::GetGangRequest request;
    request.set_gang_id(id);
    v1::GetGangResponse response;
    EXPECT_TRUE(scheduler_->GetGang(&context, request, &response).ok());
    return response.gang();
  }

  void Succeed(const std::string& id) {
    grpc::ClientContext context;
    v1::ReportGangRequest request;
    request.set_gang_id(id);
    request.set_state(v1::GANG_STATE_SUCCEEDED);
    v1::ReportGangResponse response;
    grpc::Status status = scheduler_->ReportGang(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
  }

  // Finishes each admitted gang once it has run its planned time, until all
  // have (at most `limit`). Returns whether all finished.
  bool RunToCompletion(const std::vector<std::string>& ids,
                       const std::vector<Planned>& plan, absl::Duration limit) {
    std::vector<bool> done(ids.size(), false);
    const absl::Time deadline = absl::Now() + limit;
    while (absl::Now() < deadline) {
      bool all = true;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (done[i]) continue;
        all = false;
        const v1::Gang gang = Get(ids[i]);
        if (!gang.has_admit_time()) continue;
        const absl::Time admitted =
            absl::FromUnixSeconds(gang.admit_time().seconds()) +
            absl::Nanoseconds(gang.admit_time().nanos());
        if (absl::Now() >= admitted + plan[i].run) {
          Succeed(ids[i]);
          done[i] = true;
        }
      }
      if (all) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  // Runs phalanxctl `args` against the daemon, its stdout into `file`.
  void CtlInto(const std::string& args, const std::string& file) {
    // The subshell's stderr goes to RunShell's output, its stdout to `file`.
    const ShellResult ctl = RunShell(absl::StrCat(
        "(PHALANX_CONFIG=/dev/null ", PHALANXCTL_PATH, " --server ",
        daemon_->address(), " --timeout 10 ", args, " > ", file, ")"));
    ASSERT_EQ(ctl.exit_code, 0) << args << ": " << ctl.output << ReadAll(file);
  }

  // Submits `plan` (100 ms apart), finishes each gang once it has run its
  // planned time, exports the daemon's history, configuration, queues and
  // fleet with phalanxctl and replays them with phalanx-sim under that
  // configuration. Sets `ids` and every gang's `starts`.
  void RunAndReplay(const std::vector<Planned>& plan,
                    std::vector<std::string>& ids,
                    std::map<std::string, std::pair<double, double>>& starts) {
    for (size_t i = 0; i < plan.size(); ++i) {
      ids.push_back(Submit(plan[i], static_cast<int>(i)));
      absl::SleepFor(absl::Milliseconds(100));
    }
    ASSERT_TRUE(RunToCompletion(ids, plan, absl::Seconds(120)));
    // Beside the data dir, in the daemon's temporary root.
    const std::string base =
        std::filesystem::path(daemon_->data_dir()).parent_path().string();
    CtlInto("history export", base + "/history.csv");
    CtlInto("config get", base + "/current.json");
    CtlInto("-o json queues list", base + "/queues.json");
    CtlInto("-o json nodes list", base + "/fleet.json");
    // phalanx-sim bounds itself: --max-policy-seconds.
    const ShellResult sim = RunShell(absl::StrCat(
        PHALANX_SIM_PATH, " --trace ", base, "/history.csv --fleet ", base,
        "/fleet.json --queues ", base, "/queues.json --config ", base,
        "/current.json --out ", base,
        "/replay --plot=false --progress=false --max-policy-seconds 60"));
    ASSERT_EQ(sim.exit_code, 0) << sim.output;
    EXPECT_THAT(ReadAll(base + "/replay/queues.md"),
                ::testing::HasSubstr("`a`"));
    // gang,queue,gpus,recorded,current
    const std::string csv = ReadAll(base + "/replay/starts.csv");
    std::printf("starts.csv:\n%s", csv.c_str());
    std::vector<std::string> lines =
        absl::StrSplit(csv, '\n', absl::SkipEmpty());
    ASSERT_EQ(lines.size(), plan.size() + 1) << sim.output;
    EXPECT_EQ(lines[0], "gang,queue,gpus,recorded,current");
    for (size_t i = 1; i < lines.size(); ++i) {
      std::vector<std::string> f = absl::StrSplit(lines[i], ',');
      ASSERT_EQ(f.size(), 5u) << lines[i];
      double recorded = 0;
      double replayed = 0;
      ASSERT_TRUE(absl::SimpleAtod(f[3], &recorded)) << lines[i];
      ASSERT_TRUE(absl::SimpleAtod(f[4], &replayed)) << lines[i];
      starts[f[0]] = {recorded, replayed};
    }
    for (const std::string& id : ids) ASSERT_TRUE(starts.contains(id)) << id;
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
};

// Each gang's recorded and replayed first start, seconds since the epoch.
using Starts = std::map<std::string, std::pair<double, double>>;

TEST_F(HistoryReplayTest, TheReplayUnderTheDaemonsConfigStartsGangsAsRecorded) {
  // 8 nodes of 8 GPUs. The first gang takes the fleet; the others queue
  // behind it and then run in pairs and alone: each start waits for a
  // recorded finish, so the replay must follow the same chain (the fifth
  // gang backfills ahead of the fourth).
  const std::vector<Planned> plan = {{"a", 8, absl::Seconds(2)},
                                     {"b", 4, absl::Seconds(3)},
                                     {"a", 4, absl::Seconds(1)},
                                     {"b", 6, absl::Seconds(2)},
                                     {"a", 2, absl::Seconds(1)}};
  std::vector<std::string> ids;
  Starts starts;
  ASSERT_NO_FATAL_FAILURE(RunAndReplay(plan, ids, starts));
  // The daemon admits in the loop turn that applies the finish that frees
  // the GPUs, at that turn's time; the replay at the finish: the same
  // instant. 0.5 s leaves room for a turn that misses its cycle.
  for (const std::string& id : ids) {
    EXPECT_NEAR(starts[id].second, starts[id].first, 0.5) << id;
  }
  // Only the first gang started at once; the chain made the others wait.
  EXPECT_GT(starts[ids[1]].first, starts[ids[0]].first + 1.5);
  EXPECT_LT(starts[ids[4]].first, starts[ids[3]].first);  // backfilled
}

// A seeded workload of 40 gangs, estimates off by 0.5-3x, for the
// accuracy figure of bench/README.md (run with
// --gtest_also_run_disabled_tests): prints the median, p95 and largest
// |replayed − recorded| start.
TEST_F(HistoryReplayTest, DISABLED_ASeededWorkloadForTheAccuracyFigure) {
  std::mt19937 random(7);
  const int pods[] = {1, 2, 2, 4, 4, 6, 8};
  std::vector<Planned> plan;
  for (int i = 0; i < 40; ++i) {
    // Estimates 0.5 to 3 times the run, as users' are.
    const absl::Duration run = absl::Milliseconds(500 + random() % 2500);
    plan.push_back({i % 3 == 0 ? "b" : "a", pods[random() % 7], run,
                    run * (0.5 + (random() % 250) / 100.0)});
  }
  std::vector<std::string> ids;
  Starts starts;
  ASSERT_NO_FATAL_FAILURE(RunAndReplay(plan, ids, starts));
  std::vector<double> errors;
  for (const std::string& id : ids) {
    errors.push_back(std::abs(starts[id].second - starts[id].first));
  }
  std::sort(errors.begin(), errors.end());
  std::printf(
      "replayed start error over %zu gangs: median %.3f s, p95 %.3f "
      "s, max %.3f s\n",
      errors.size(), errors[errors.size() / 2],
      errors[errors.size() * 95 / 100], errors.back());
}

}  // namespace
}  // namespace phalanx::testing
