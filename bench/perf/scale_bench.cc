// phalanx-scale-bench: one point of the core scale grid —
// a scheduler of `--nodes` nodes × 8 GPUs holding `--pending` pending gangs
// of the workload mix, in one process (no I/O, virtual clock). Writes one
// JSON object (bench/scale.sh runs the grid, one process a point, and
// bench/perf/assemble_scale.py folds the points into bench/results/scale.*).
//
// Times are CPU seconds of this (single) thread, user + system, so other
// work on a shared machine does not stretch them; the phases' bounds are
// wall-clock. Measured (all bounded in count and in time):
//   build      MakeScheduler: the gangs generated and Scheduler::Restore'd,
//              with the NO_FIT reason gangs have once a cycle on a full
//              fleet stopped before them (--waiting: never reached).
//   rss        VmRSS after the build (malloc_trim first); the grid divides
//              the difference to the 0-pending point by the pending count.
//   fill       one RunCycle + TakeMutation into the empty fleet:
//              admissions_per_sec = gangs admitted ÷ its seconds. The build
//              holds `pending` + an estimate of what the fleet takes, so
//              about `pending` gangs are still pending after the fill.
//   unchanged  a cycle with nothing changed (the clock moves 1 s).
//   one_done   a cycle after one random active gang completed (its refill
//              submits are outside the timer).
//   churn      steps of `--completions` completions, as many submits as the
//              last step admitted, RunCycle + TakeMutation: admissions per
//              CPU second of the whole step, and of the cycle alone; Submit
//              and Report (completion) CPU per gang.
//   --trace_cycles prints each cycle, and what two gangs of a cycle that
//              rewrites 1,000 or more now say.
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/json.h"
#include "bench/perf/workload.h"
#include "bench/stats.h"
#include "core/scheduler.h"

ABSL_FLAG(int, nodes, 10000, "Nodes of 8 GPUs");
ABSL_FLAG(int, pending, 100000, "Pending gangs (after the fill)");
ABSL_FLAG(int, completions, 256, "Completions a churn step");
ABSL_FLAG(int, max_steps, 100, "Most churn steps");
ABSL_FLAG(int, max_cycles, 200, "Most unchanged and one-completion cycles");
ABSL_FLAG(double, seconds, 5, "Time bound of each measured phase");
ABSL_FLAG(bool, rss_only, false, "Build, report the RSS, and stop");
ABSL_FLAG(bool, waiting, false,
          "Build the pending gangs as never reached (WAITING), as Submit "
          "leaves them, instead of with the NO_FIT reason a full fleet's "
          "cycle gives them: the first cycle that finds the fleet full then "
          "rewrites them all (measure it with --nodes 10000: the fill is "
          "that cycle)");
ABSL_FLAG(bool, trace_cycles, false,
          "Print each measured cycle (phase, us, admitted, gangs written) to "
          "stderr");
ABSL_FLAG(std::string, out, "", "Write the JSON here (default: stdout)");

namespace phalanx::perf {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU seconds of the calling thread.
double CpuNow() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + now.tv_nsec * 1e-9;
}

double CpuSince(double start) { return CpuNow() - start; }

int64_t RssBytes() {
  malloc_trim(0);
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0;
  int64_t resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// Gangs admitted by `mutation`, appended to `active`.
int CollectAdmitted(const core::Mutation& mutation,
                    std::vector<core::GangId>& active) {
  int admitted = 0;
  for (const core::Event& event : mutation.events) {
    if (event.type != core::EventType::kAdmitted) continue;
    ++admitted;
    active.push_back(event.gang->id);
  }
  return admitted;
}

int64_t PendingCount(const core::Scheduler& scheduler) {
  int64_t pending = 0;
  for (const auto& [id, gang] : scheduler.gangs()) {
    pending += gang->state == core::GangState::kPending ? 1 : 0;
  }
  return pending;
}

void Trace(const char* phase, double seconds, int admitted,
           const core::Mutation& mutation) {
  if (!absl::GetFlag(FLAGS_trace_cycles)) return;
  std::fprintf(stderr, "%s %.0f us admitted %d gangs_put %zu events %zu\n",
               phase, seconds * 1e6, admitted, mutation.gangs_put.size(),
               mutation.events.size());
  // A cycle that rewrites many gangs: what changed in two of them.
  if (mutation.gangs_put.size() < 1000) return;
  for (size_t i : {size_t{0}, mutation.gangs_put.size() / 2}) {
    const core::Gang& gang = *mutation.gangs_put[i];
    std::fprintf(stderr, "  e.g. %s %s: %s\n", gang.id.value().c_str(),
                 core::GangStateName(gang.state), gang.reason.c_str());
  }
}

// Mean, p50 and max of per-cycle seconds, in microseconds.
bench::JsonObject CycleJson(std::vector<double> seconds, int64_t admitted) {
  double total = 0;
  double most = 0;
  for (double s : seconds) {
    total += s;
    most = std::max(most, s);
  }
  const double n = static_cast<double>(seconds.size());
  bench::JsonObject json;
  json.Add("cycles", static_cast<int64_t>(seconds.size()))
      .Add("mean_us", n > 0 ? total / n * 1e6 : 0.0)
      .Add("p50_us", bench::Percentile(seconds, 50) * 1e6)
      .Add("max_us", most * 1e6)
      .Add("admitted", admitted);
  return json;
}

class Point {
 public:
  Point(int nodes, int pending) : nodes_(nodes), pending_(pending) {}

  bench::JsonObject Run(bool rss_only) {
    bench::JsonObject json;
    json.Add("nodes", nodes_).Add("pending", pending_);
    const int64_t rss_start = RssBytes();
    Build();
    json.Add("rss_bytes_start", rss_start)
        .Add("rss_bytes", RssBytes())
        .Add("built_gangs", built_)
        .Add("build_seconds", build_seconds_);
    if (rss_only) return json;
    json.Add("fill", Fill());
    json.Add("pending_after_fill", PendingCount(*scheduler_));
    json.Add("unchanged", Unchanged());
    json.Add("one_done", OneDone());
    json.Add("churn", Churn());
    json.Add("pending_at_end", PendingCount(*scheduler_))
        .Add("active_at_end", static_cast<int64_t>(active_.size()));
    return json;
  }

 private:
  // Pending gangs plus about what an empty fleet takes (the mix averages
  // 23.5 GPUs a gang; fragmentation leaves some GPUs free).
  void Build() {
    core::Config config = BenchConfig();
    config.limits.max_pending_gangs_per_queue = 10'000'000;
    built_ = pending_ == 0 ? 0 : pending_ + nodes_ * kGpusPerNode / 24;
    const double start = CpuNow();
    scheduler_ =
        MakeScheduler(nodes_, built_, /*seed=*/42, config,
                      absl::GetFlag(FLAGS_waiting) ? core::kWaitingReason
                                                   : core::kNoFreeGpuReason);
    build_seconds_ = CpuSince(start);
  }

  bench::JsonObject Fill() {
    now_ += absl::Seconds(1);
    const double start = CpuNow();
    scheduler_->RunCycle(now_);
    const core::Mutation mutation = scheduler_->TakeMutation();
    const int admitted = CollectAdmitted(mutation, active_);
    const double seconds = CpuSince(start);
    Trace("fill", seconds, admitted, mutation);
    bench::JsonObject json;
    json.Add("seconds", seconds)
        .Add("admitted", admitted)
        .Add("admissions_per_sec", seconds > 0 ? admitted / seconds : 0.0)
        .Add("gangs_written", static_cast<int64_t>(mutation.gangs_put.size()));
    return json;
  }

  bool Bounded(int count, int most, Clock::time_point start) const {
    return count < most &&
           (count < 3 || SecondsSince(start) < absl::GetFlag(FLAGS_seconds));
  }

  bench::JsonObject Unchanged() {
    std::vector<double> seconds;
    int64_t admitted = 0;
    const Clock::time_point start = Clock::now();
    while (Bounded(static_cast<int>(seconds.size()),
                   absl::GetFlag(FLAGS_max_cycles), start)) {
      now_ += absl::Seconds(1);
      const double cycle = CpuNow();
      scheduler_->RunCycle(now_);
      const core::Mutation mutation = scheduler_->TakeMutation();
      const int admitted_now = CollectAdmitted(mutation, active_);
      seconds.push_back(CpuSince(cycle));
      Trace("unchanged", seconds.back(), admitted_now, mutation);
      admitted += admitted_now;
    }
    return CycleJson(std::move(seconds), admitted);
  }

  bench::JsonObject OneDone() {
    std::vector<double> seconds;
    int64_t admitted = 0;
    int refill = 0;
    const Clock::time_point start = Clock::now();
    while (Bounded(static_cast<int>(seconds.size()),
                   absl::GetFlag(FLAGS_max_cycles), start)) {
      now_ += absl::Milliseconds(100);
      CompleteRandom(*scheduler_, active_, mix_, 1, now_);
      SubmitMany(*scheduler_, mix_, refill, now_);
      const double cycle = CpuNow();
      scheduler_->RunCycle(now_);
      const core::Mutation mutation = scheduler_->TakeMutation();
      refill = CollectAdmitted(mutation, active_);
      seconds.push_back(CpuSince(cycle));
      Trace("one_done", seconds.back(), refill, mutation);
      admitted += refill;
    }
    SubmitMany(*scheduler_, mix_, refill, now_);
    return CycleJson(std::move(seconds), admitted);
  }

  bench::JsonObject Churn() {
    const int completions = absl::GetFlag(FLAGS_completions);
    int steps = 0;
    int refill = 0;
    int64_t admitted = 0;
    int64_t submitted = 0;
    double cycle_seconds = 0;
    double submit_seconds = 0;
    double report_seconds = 0;
    const Clock::time_point start = Clock::now();
    while (Bounded(steps, absl::GetFlag(FLAGS_max_steps), start)) {
      now_ += absl::Milliseconds(100);
      double phase = CpuNow();
      CompleteRandom(*scheduler_, active_, mix_, completions, now_);
      report_seconds += CpuSince(phase);
      phase = CpuNow();
      submitted += SubmitMany(*scheduler_, mix_, refill, now_);
      submit_seconds += CpuSince(phase);
      phase = CpuNow();
      scheduler_->RunCycle(now_);
      refill = CollectAdmitted(scheduler_->TakeMutation(), active_);
      cycle_seconds += CpuSince(phase);
      admitted += refill;
      ++steps;
    }
    const double seconds = report_seconds + submit_seconds + cycle_seconds;
    bench::JsonObject json;
    json.Add("completions", completions)
        .Add("steps", steps)
        .Add("seconds", seconds)
        .Add("admitted", admitted)
        .Add("admissions_per_sec", seconds > 0 ? admitted / seconds : 0.0)
        .Add("cycle_only_admissions_per_sec",
             cycle_seconds > 0 ? admitted / cycle_seconds : 0.0)
        .Add("cycle_mean_us", steps > 0 ? cycle_seconds / steps * 1e6 : 0.0)
        .Add("submit_us_per_gang",
             submitted > 0 ? submit_seconds / submitted * 1e6 : 0.0)
        .Add("report_us_per_gang",
             steps > 0 ? report_seconds / (steps * completions) * 1e6 : 0.0);
    return json;
  }

  const int nodes_;
  const int pending_;
  int built_ = 0;
  double build_seconds_ = 0;
  std::unique_ptr<core::Scheduler> scheduler_;
  std::vector<core::GangId> active_;
  GangMix mix_{/*seed=*/7};
  absl::Time now_ = BenchStart();
};

}  // namespace
}  // namespace phalanx::perf

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  phalanx::perf::Point point(absl::GetFlag(FLAGS_nodes),
                             absl::GetFlag(FLAGS_pending));
  const std::string json =
      point.Run(absl::GetFlag(FLAGS_rss_only)).Dump() + "\n";
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::fputs(json.c_str(), stdout);
    return 0;
  }
  std::ofstream file(out);
  file << json;
  return file ? 0 : 1;
}
