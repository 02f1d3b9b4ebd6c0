// HoldTracker: what held a few chosen jobs while they waited, gathered by
// the replay from what core exposes after each admission cycle (the gang's
// reason code, the reservations core holds, PREEMPTING events, the gangs
// admitted while it waited). It only reads: the decisions are the same with
// or without it.
//
// Time is attributed per spell between two cycles: each holder observed at
// a cycle is charged the time until the next cycle (or the job's
// admission). A spell with several holders (the gangs on a reserved
// domain, several plans ahead) charges each of them in full, so a job's
// held times may sum to more than its wait.
// Owned by one replay; not thread-safe.
#ifndef PHALANX_BENCH_SIM_HOLD_TRACKER_H_
#define PHALANX_BENCH_SIM_HOLD_TRACKER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace phalanx::bench {

// Gangs admitted while the job waited although submitted after it, by
// (team, "higher" | "same" | "lower" priority than the job).
struct PassedTally {
  int64_t gangs = 0;
  int64_t gpus = 0;      // summed over the gangs
  int64_t largest = 0;   // GPUs of the largest
  double gpu_hours = 0;  // GPUs × actual duration, summed
};

// What held one job, over the whole replay.
struct HoldReport {
  int job = 0;  // index in Workload::jobs
  // Pending time per holder ("NO_FIT, planned ahead: job 12 (team-a,
  // 512 GPUs, priority 0)", "QUOTA", …).
  std::map<std::string, absl::Duration> held;
  std::map<int, int64_t> preempted_by;  // preempting job -> times
  std::map<std::pair<std::string, std::string>, PassedTally> passed_by;
};

class HoldTracker {
 public:
  // Tracks `jobs` (indices into the workload; any order, no repeats).
  explicit HoldTracker(std::vector<int> jobs);

  // Whether `job` is tracked.
  bool Tracks(int job) const { return slot_.count(job) > 0; }
  // The tracked jobs.
  const std::vector<int>& jobs() const { return jobs_; }
  // At a cycle at `now`: charges the time since the job's last observation
  // to its last holders, and makes `holders` the current ones.
  void Observe(int job, absl::Time now, std::vector<std::string> holders);
  // The job stopped waiting at `now` (admitted, finished, failed): charges
  // the last holders up to `now`.
  void Leave(int job, absl::Time now);
  // `job` was preempted by `by` (a job index, -1 when unknown).
  void Preempted(int job, int by);
  // While `job` waited, a gang of `team` with `gpus` GPUs running for
  // `duration`, of `relation` priority, was admitted ahead of it.
  void Passed(int job, const std::string& team, const std::string& relation,
              int64_t gpus, absl::Duration duration);
  // The reports, in the order the jobs were given.
  std::vector<HoldReport> Finish() const { return reports_; }

 private:
  struct Open {
    absl::Time since;
    std::vector<std::string> holders;
    bool open = false;
  };
  std::vector<int> jobs_;
  std::map<int, size_t> slot_;  // job -> index in reports_ and open_
  std::vector<HoldReport> reports_;
  std::vector<Open> open_;
};

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_SIM_HOLD_TRACKER_H_
