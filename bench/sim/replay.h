// Replay: runs a workload through core::Scheduler on a virtual clock and
// measures it. The scheduler never sees true durations, only the estimates;
// a job runs exactly its duration once admitted, minus the work it saved in
// checkpoints of earlier runs.
//
// The simulated launcher checkpoints every job each checkpoint interval of
// run time and reports it through Scheduler::Report (the daemon's ReportGang
// path); a preempted, evicted or failed run resumes from its last
// checkpoint, and only the work since then is lost. With a node MTBF, every
// node fails at seeded exponential times and is back after the repair time;
// failures and returns go through Scheduler::SetNodeState (UNHEALTHY, then
// READY), so core repairs or evicts the gangs on it. A gang repaired in
// place restarts from its last checkpoint on its new placement.
//
// An elastic job (TraceJob::elastic; core/elastic.h) conserves its work:
// its duration is its run time at full size, and a run on fewer pods of its
// elastic pod set does the work at pods ÷ full pods the rate (core's
// RuntimeAtSize), so a job admitted at half size ends at start + twice its
// remaining time. A resize (RESIZED: grown, or a shrink ended) restarts its
// ranks from the last checkpoint at the new size: the work since then is
// lost, as in a preemption. PREEMPTING with shrink_to is acknowledged as a
// preemption is (one cycle_interval later) while the job runs on; it is
// not requeued. Core grows gangs only in a cycle, so the replay runs one
// when a job below its full size may grow next (elastic.grow_interval).
//
// Each step takes the next timestamp with anything due, applies completions,
// then preemption acknowledgements (the simulated launcher acknowledges one
// cycle_interval after PREEMPTING), then checkpoints, node failures and
// returns, then arrivals, runs one admission cycle (not when only
// checkpoints were due: they free nothing), and reads the step's events from
// TakeMutation(). The replay ends when every job has finished (or was
// refused as never fitting).
//
// Functions here are pure over their arguments; Replay is single-threaded and
// deterministic: the same inputs give the same result.
#ifndef PHALANX_BENCH_SIM_REPLAY_H_
#define PHALANX_BENCH_SIM_REPLAY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/sim/hold_tracker.h"
#include "bench/sim/sim_fleet.h"
#include "bench/sim/sim_metrics.h"
#include "bench/sim/trace.h"
#include "core/model.h"

namespace phalanx::bench {

struct Workload {
  std::vector<TraceJob> jobs;             // file order
  std::vector<absl::Duration> estimates;  // estimated_runtime, per job
  // The queues the jobs go to (a daemon's, from `phalanxctl queues list -o
  // json`): every job's team must name a queue among them. Empty = one
  // queue a team (TeamQueues).
  std::vector<core::Queue> queues;
};

// Returns per job its declared estimate (TraceJob::declared_estimate, else
// declared_max_runtime) when the trace has one, else none (zero) when the
// trace records declared run times, else actual × f, f uniform
// in [0.5, 3] drawn once per job in file order from `seed` (a draw is made
// for every job, so the draws do not depend on which jobs declared one).
std::vector<absl::Duration> DrawEstimates(const std::vector<TraceJob>& jobs,
                                          uint64_t seed);

// The team names of `jobs`, sorted (index = team id).
std::vector<std::string> TeamNames(const std::vector<TraceJob>& jobs);

// The cohort "cohort" and one queue per team (parent "cohort", weight 1,
// nominal = an equal share of each GPU model's GPUs rounded down, the
// remainder one GPU each to the first teams by name, borrowing and lending
// unlimited). Queue names are team names with characters core refuses
// replaced by '_' (and made unique). Cohort first, then teams in `teams`
// order.
std::vector<core::Queue> TeamQueues(const std::vector<std::string>& teams,
                                    const SimFleet& fleet);

// The gang of `job`: the shape the trace gives (TraceJob::pods,
// gpus_per_pod, gpu_model, topology); else up to G GPUs = one pod of that
// many GPUs; more = ceil(n / G) pods of G GPUs, REQUIRED rack when that
// many nodes fit in a rack, else REQUIRED block when they fit in a block,
// else PREFERRED block. `estimate` is its estimated_runtime; a declared max
// runtime is not set (the replay runs a job its recorded time, and core
// would end it at max_runtime counted from its last start).
core::GangSpec JobSpec(const TraceJob& job, absl::Duration estimate,
                       const SimFleet& fleet, const core::QueueName& queue);

// One core event about a job (kept when ReplayOptions::record_events).
struct EventRecord {
  absl::Time time;
  core::EventType type = core::EventType::kSubmitted;
  int job = 0;         // index in Workload::jobs
  int64_t gpus = 0;    // GPUs of the gang (as placed, or as asked)
  std::string reason;  // the gang's reason after the event
};

struct ReplayResult {
  PolicyMetrics metrics;  // sim_seconds left 0
  std::vector<SeriesRow> series;
  std::vector<EventRecord> events;  // empty unless record_events
  int64_t steps = 0;                // admission cycles run
  // Per job (Workload::jobs order): its total wait when it finished, else
  // nullopt (refused, failed, cancelled).
  std::vector<std::optional<absl::Duration>> waits;
  // Per job: its first admission, if any, and how often it was preempted.
  std::vector<std::optional<absl::Time>> first_starts;
  std::vector<int> preemptions;
  // Per job: how often it was resized (grown, or shrunk instead of
  // preempted), the GPUs of its first admission (0 = never admitted), and
  // when it finished, if it did.
  std::vector<int> resizes;
  std::vector<int64_t> first_gpus;
  std::vector<std::optional<absl::Time>> finishes;
  // What held each of ReplayOptions::explain_jobs, in that order.
  std::vector<HoldReport> holds;
  // With ReplayOptions::plan_accuracy, per job: its first start minus the
  // start the plan gave it just after its submit, when it had one.
  std::vector<std::optional<absl::Duration>> plan_errors;
};

// Called after each step with the jobs done (finished or refused) of
// `total`; returning false stops the replay (Replay then fails with
// Cancelled).
using ProgressFn = std::function<bool(int64_t done, int64_t total)>;

struct ReplayOptions {
  absl::Duration bucket_width = absl::Hours(1);  // of the time series
  // Keep ADMITTED, PREEMPTING, REQUEUED, EVICTED, REPAIRED, RESERVED,
  // FAILED and CANCELLED events (for looking into a policy; SUCCEEDED and
  // SUBMITTED are implied).
  bool record_events = false;
  ProgressFn progress;  // may be null
  // Run time between a job's checkpoints (0 = never); a job's
  // TraceJob::checkpoint_interval overrides it.
  absl::Duration checkpoint_interval = absl::Minutes(30);
  // Mean time between failures of one node; 0 = nodes never fail.
  absl::Duration node_mtbf = absl::ZeroDuration();
  // How long a failed node stays UNHEALTHY.
  absl::Duration node_repair = absl::Hours(4);
  // Seed of the failure times (node i draws from its own stream, so every
  // policy sees the same failures).
  uint64_t failure_seed = 1;
  // Check after every event that no GPU is held by two jobs and none on an
  // UNHEALTHY node (for tests; costs a map update per placement).
  bool check_gpus = false;
  // Read the plan (core/plan.h) after each step with arrivals, as a user
  // asking when a new gang starts, and keep each job's estimate to compare
  // with its first start (ReplayResult::plan_errors). Reading the plan
  // changes no decision unless planning.binding is on.
  bool plan_accuracy = false;
  // Jobs (indices into Workload::jobs) whose holders to gather after every
  // cycle (HoldTracker); reading them changes no decision.
  std::vector<int> explain_jobs;
};

// Replays `workload` on `fleet` under `config` (its topology_levels must be
// the fleet's). InvalidArgument for a configuration core refuses; Internal
// when core refuses a command the replay relies on; Cancelled when
// `options.progress` stopped it.
absl::StatusOr<ReplayResult> Replay(const core::Config& config,
                                    const SimFleet& fleet,
                                    const Workload& workload,
                                    const ReplayOptions& options);

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_SIM_REPLAY_H_
