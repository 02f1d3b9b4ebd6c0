#include "bench/sim/replay.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/sim/elastic_jobs.h"
#include "bench/sim/sim_random.h"
#include "core/elastic.h"
#include "core/fleet_report.h"
#include "core/reason.h"
#include "core/scheduler.h"
#include "core/validate.h"

namespace phalanx::bench {
namespace {

constexpr double kMinEstimateFactor = 0.5;
constexpr double kMaxEstimateFactor = 3.0;
// Consecutive idle cycles tried when nothing is due but gangs still wait
// (for time-based eligibility); after that the replay gives up on them.
constexpr int kMaxIdleCycles = 64;

// A name core accepts as a queue name.
std::string QueueNameOf(const std::string& team) {
  std::string name = team.substr(0, core::kMaxNameBytes - 8);
  // Queue names are lower case ([a-z0-9._-]).
  for (char& c : name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return name;
}

enum class Phase { kNotSubmitted, kPending, kRunning, kPreempting, kDone };

// What the replay knows about one job.
struct JobRun {
  core::GangId gang;
  int team = 0;
  // Pods and GPUs of the gang at its smallest size (its spec's, unless
  // elastic): what it needs to start, for the blocked measure.
  int pods = 0;
  int64_t pending_gpus = 0;
  int64_t held_gpus = 0;  // GPUs of the current run (from its placement)
  // An elastic job's elastic pod set: its pods at full size, and in the
  // current run (both 0 for a fixed job).
  int full_pods = 0;
  int size_pods = 0;
  // PREEMPTING for a shrink: it keeps running until the shrink ends.
  bool shrinking = false;
  Phase phase = Phase::kNotSubmitted;
  absl::Time since;  // pending since, or run start
  absl::Duration waited;
  uint32_t generation = 0;  // bumped whenever a run starts or ends
  absl::Duration interval;  // between checkpoints; 0 = never
  // Work saved by the last checkpoint (over all runs), and what the current
  // run started from; work is run time at full size.
  absl::Duration saved;
  absl::Duration run_base;
  absl::Time last_checkpoint;  // of the current run; its start if none
  std::vector<core::PodPlacement> placement;  // with check_gpus only
};

// Run time at `job`'s current size that does `work` (run time at full
// size): work × full pods ÷ pods now, as core's RuntimeAtSize.
absl::Duration WallFor(const JobRun& job, absl::Duration work) {
  if (job.size_pods <= 0 || job.size_pods >= job.full_pods) return work;
  return work * job.full_pods / job.size_pods;
}

// Work (run time at full size) that `wall` of run at `job`'s current size
// does.
absl::Duration WorkIn(const JobRun& job, absl::Duration wall) {
  if (job.size_pods <= 0 || job.size_pods >= job.full_pods) return wall;
  return wall * job.size_pods / job.full_pods;
}

// One node's failure times, drawn from its own seeded stream.
struct NodeClock {
  SimRandom random;
  bool down = false;
};

// Something due at a time: a completion, an acknowledgement, a checkpoint,
// a node's failure or return, or a tick (idle, or an elastic job's growth).
struct Timer {
  enum Kind {
    kComplete = 0,
    kAck = 1,
    kCheckpoint = 2,
    kNodeFail = 3,
    kNodeBack = 4,
    kTick = 5
  };
  absl::Time at;
  Kind kind;
  int job;  // the node's index for kNodeFail and kNodeBack
  uint32_t generation;
  bool operator>(const Timer& o) const {
    return std::tie(at, kind, job) > std::tie(o.at, o.kind, o.job);
  }
};

class Engine {
 public:
  Engine(const core::Config& config, const SimFleet& fleet,
         const Workload& workload, const ReplayOptions& options);

  absl::StatusOr<ReplayResult> Run();

 private:
  absl::Status Setup();
  // ReplayOptions::queues, or TeamQueues; sets queue_of_team_.
  absl::Status PutQueues();
  std::optional<absl::Time> NextTime() const;
  // Returns whether an admission cycle ran (not for checkpoints only).
  absl::StatusOr<bool> Step(absl::Time now);
  // Returns whether something other than checkpoints was due.
  absl::StatusOr<bool> FireTimers(absl::Time now);
  absl::Status Checkpoint(JobRun& job, int index, absl::Time now);
  absl::Status NodeEvent(const Timer& timer, absl::Time now);
  void StartRun(JobRun& job, int index, absl::Time now);
  absl::Status Arrive(absl::Time now);
  void HandleEvent(const core::Event& event);
  void Record(const core::Event& event, int index);
  void OnAdmitted(JobRun& job, int index, const core::Gang& gang,
                  absl::Time now);
  // Reads the plan of the jobs that arrived at `now` and are pending.
  void ReadPlans(size_t first_arrival, absl::Time now);
  void OnPreempting(JobRun& job, int index, absl::Time now);
  // PREEMPTING to shrink: the job runs on; the launcher acknowledges.
  void OnShrinking(JobRun& job, int index, absl::Time now);
  // Grown, or shrunk when the shrink ended: the run restarts from its last
  // checkpoint at the new size.
  void OnResized(JobRun& job, int index, const core::Gang& gang,
                 absl::Time now);
  // Sets the GPUs of `job`'s run, and its size, from `gang`'s placement.
  void SetRunSize(JobRun& job, const core::Gang& gang);
  // A cycle when the current run of an elastic job below its full size may
  // grow next (core grows gangs only in a cycle).
  void DueToGrow(const JobRun& job, int index, absl::Time now);
  // The launcher of an elastic job reports RUNNING once its ranks start
  // (core grows only RUNNING gangs); fixed jobs stay ADMITTED, as they
  // always have in the replay.
  void ReportRunning(const JobRun& job, absl::Time now);
  void OnRepaired(JobRun& job, int index, const core::Gang& gang,
                  absl::Time now);
  // Ends the current run: completed, or thrown back to its last checkpoint.
  void OnRunEnded(JobRun& job, absl::Time now, bool completed);
  void TrackGpus(JobRun& job, int index, const core::Gang* gang);
  void AddPending(const JobRun& job, int sign);
  FleetSample Sample() const;
  void MaybeTick(absl::Time now);
  // HoldTracker feeds (only for ReplayOptions::explain_jobs).
  void ObserveHolds(absl::Time now);
  std::vector<std::string> HoldersOf(const core::Gang& gang) const;
  void NotePassed(int index, const core::Gang& gang);
  void NotePreempted(int index, const core::Gang& gang);
  int JobOfGang(const core::GangId& id) const;
  std::string Describe(int index) const;

  const core::Config& config_;
  const SimFleet& fleet_;
  const Workload& workload_;
  const ReplayOptions& options_;
  core::Scheduler scheduler_;
  std::vector<std::string> teams_;
  std::vector<core::QueueName> queue_of_team_;
  std::vector<int> arrival_order_;  // job indices by (submit time, file order)
  size_t next_arrival_ = 0;
  std::vector<JobRun> jobs_;
  // With plan_accuracy: each job's planned start read just after its
  // submit, and its first start minus it.
  std::vector<std::optional<absl::Time>> planned_start_;
  std::vector<std::optional<absl::Duration>> plan_errors_;
  std::vector<int> job_of_seq_;  // gang sequence number -> job index
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>>
      node_timers_;  // failures and returns; not due once every job is done
  std::vector<NodeClock> node_clocks_;
  std::map<std::pair<std::string, int>, int> gpu_holder_;  // check_gpus
  absl::Status gpu_error_;
  absl::Status report_error_;                  // a RUNNING report core refused
  std::map<int, int64_t> pending_multi_node_;  // pods -> GPUs pending
  int64_t pending_ = 0;
  int64_t running_ = 0;
  int64_t done_ = 0;
  int idle_cycles_ = 0;
  MetricsAccumulator metrics_;
  std::vector<EventRecord> events_;
  std::vector<std::optional<absl::Duration>> waits_;
  std::vector<std::optional<absl::Time>> first_starts_;
  std::vector<int> preemptions_;
  std::vector<int> resizes_;
  std::vector<int64_t> first_gpus_;
  std::vector<std::optional<absl::Time>> finishes_;
  HoldTracker holds_;
};

// Job indices by submit time, file order breaking ties.
std::vector<int> ArrivalOrder(const std::vector<TraceJob>& jobs) {
  std::vector<int> order(jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return jobs[a].submit_time < jobs[b].submit_time;
  });
  return order;
}

// The submit time of the first (or last) job in `order`.
absl::Time SubmitAt(const Workload& workload, const std::vector<int>& order,
                    bool last) {
  if (order.empty()) return absl::UnixEpoch();
  return workload.jobs[last ? order.back() : order.front()].submit_time;
}

Engine::Engine(const core::Config& config, const SimFleet& fleet,
               const Workload& workload, const ReplayOptions& options)
    : config_(config),
      fleet_(fleet),
      workload_(workload),
      options_(options),
      scheduler_(config),
      teams_(TeamNames(workload.jobs)),
      arrival_order_(ArrivalOrder(workload.jobs)),
      jobs_(workload.jobs.size()),
      job_of_seq_(1, -1),
      metrics_(SubmitAt(workload, arrival_order_, false),
               SubmitAt(workload, arrival_order_, true), fleet.TotalGpus(),
               static_cast<int>(teams_.size()), options.bucket_width),
      waits_(workload.jobs.size()),
      first_starts_(workload.jobs.size()),
      preemptions_(workload.jobs.size()),
      resizes_(workload.jobs.size()),
      first_gpus_(workload.jobs.size()),
      finishes_(workload.jobs.size()),
      holds_(options.explain_jobs) {}

absl::Status Engine::Setup() {
  if (absl::Status s = core::ValidateConfig(config_, "config"); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::vector<core::Node>> nodes =
      scheduler_.UpsertNodes(fleet_.nodes);
  if (!nodes.ok()) return nodes.status();
  if (absl::Status s = PutQueues(); !s.ok()) return s;
  std::map<std::string, int> team_index;
  for (size_t i = 0; i < teams_.size(); ++i) team_index[teams_[i]] = i;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    jobs_[i].team = team_index.at(workload_.jobs[i].team);
    jobs_[i].interval = workload_.jobs[i].checkpoint_interval.value_or(
        options_.checkpoint_interval);
  }
  if (options_.node_mtbf > absl::ZeroDuration()) {
    const absl::Time begin = SubmitAt(workload_, arrival_order_, false);
    const double mtbf_seconds = absl::ToDoubleSeconds(options_.node_mtbf);
    for (size_t i = 0; i < fleet_.nodes.size(); ++i) {
      // A stream per node (seed and index mixed by SplitMix64's constant).
      node_clocks_.push_back(NodeClock{
          SimRandom(options_.failure_seed * 0x9E3779B97F4A7C15ull + i + 1)});
      const absl::Time at =
          begin +
          absl::Seconds(node_clocks_[i].random.Exponential(mtbf_seconds));
      node_timers_.push(Timer{at, Timer::kNodeFail, static_cast<int>(i), 0});
    }
  }
  scheduler_.TakeMutation();
  return absl::OkStatus();
}

absl::Status Engine::PutQueues() {
  if (workload_.queues.empty()) {
    for (const core::Queue& queue : TeamQueues(teams_, fleet_)) {
      absl::StatusOr<core::Queue> put = scheduler_.PutQueue(queue);
      if (!put.ok()) return put.status();
      if (!queue.parent.empty()) queue_of_team_.push_back(queue.name);
    }
    return absl::OkStatus();
  }
  if (absl::Status s =
          core::PutQueuesParentsFirst(scheduler_, workload_.queues);
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("--queues: ", s.message()));
  }
  for (const std::string& team : teams_) {
    if (!scheduler_.queues().contains(core::QueueName(team))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cluster: \"", team.substr(0, 64), "\" is not a queue of --queues"));
    }
    queue_of_team_.push_back(core::QueueName(team));
  }
  return absl::OkStatus();
}

std::optional<absl::Time> Engine::NextTime() const {
  std::optional<absl::Time> next;
  if (next_arrival_ < arrival_order_.size()) {
    next = workload_.jobs[arrival_order_[next_arrival_]].submit_time;
  }
  if (!timers_.empty() && (!next || timers_.top().at < *next)) {
    next = timers_.top().at;
  }
  const bool all_done = done_ >= static_cast<int64_t>(jobs_.size());
  if (!all_done && !node_timers_.empty() &&
      (!next || node_timers_.top().at < *next)) {
    next = node_timers_.top().at;
  }
  return next;
}

absl::StatusOr<ReplayResult> Engine::Run() {
  if (absl::Status s = Setup(); !s.ok()) return s;
  ReplayResult result;
  std::optional<absl::Time> last;
  FleetSample sample;
  for (std::optional<absl::Time> now = NextTime(); now; now = NextTime()) {
    absl::StatusOr<bool> cycled = Step(*now);
    if (!cycled.ok()) return cycled.status();
    if (!gpu_error_.ok()) return gpu_error_;
    if (!report_error_.ok()) return report_error_;
    // A step of checkpoints only changed no capacity: the fleet sample
    // holds on until the next cycle.
    if (*cycled) {
      if (last) metrics_.AddInterval(*last, *now, sample);
      ++result.steps;
      sample = Sample();
      last = now;
    }
    MaybeTick(*now);
    if (options_.progress &&
        !options_.progress(done_, static_cast<int64_t>(jobs_.size()))) {
      return absl::CancelledError(absl::StrCat("stopped at ", done_, " of ",
                                               jobs_.size(), " jobs done"));
    }
  }
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const TraceJob& job = workload_.jobs[i];
    const int64_t gpus =
        JobSpec(job, absl::ZeroDuration(), fleet_, core::QueueName("q"))
            .TotalGpus();
    metrics_.AddJob(jobs_[i].team, gpus, job.submit_time, job.duration,
                    !jobs_[i].gang.empty());
  }
  result.metrics = metrics_.Finish();
  result.series = metrics_.Series();
  result.events = std::move(events_);
  result.waits = std::move(waits_);
  result.first_starts = std::move(first_starts_);
  result.preemptions = std::move(preemptions_);
  result.resizes = std::move(resizes_);
  result.first_gpus = std::move(first_gpus_);
  result.finishes = std::move(finishes_);
  result.holds = holds_.Finish();
  plan_errors_.resize(jobs_.size());
  result.plan_errors = std::move(plan_errors_);
  return result;
}

absl::StatusOr<bool> Engine::Step(absl::Time now) {
  // Completions, then acknowledgements, checkpoints, node failures and
  // returns (timer order), then arrivals; then one admission cycle unless
  // only checkpoints were due; then the step's events.
  absl::StatusOr<bool> changed = FireTimers(now);
  if (!changed.ok()) return changed.status();
  const size_t arrived = next_arrival_;
  if (absl::Status s = Arrive(now); !s.ok()) return s;
  const bool cycle = *changed || next_arrival_ != arrived;
  if (cycle) scheduler_.RunCycle(now);
  core::Mutation mutation = scheduler_.TakeMutation();
  for (const core::Event& event : mutation.events) HandleEvent(event);
  if (cycle && !holds_.jobs().empty()) ObserveHolds(now);
  if (options_.plan_accuracy && next_arrival_ != arrived) {
    ReadPlans(arrived, now);
  }
  return cycle;
}

void Engine::ReadPlans(size_t first_arrival, absl::Time now) {
  planned_start_.resize(jobs_.size());
  plan_errors_.resize(jobs_.size());
  scheduler_.UpdatePlan(now);
  for (size_t i = first_arrival; i < next_arrival_; ++i) {
    const int index = arrival_order_[i];
    const JobRun& job = jobs_[index];
    if (job.phase != Phase::kPending) continue;
    const core::PlannedStart plan = scheduler_.PlanOf(job.gang);
    if (plan.status == core::PlanStatus::kPlanned) {
      planned_start_[index] = plan.start;
    }
  }
}

absl::StatusOr<bool> Engine::FireTimers(absl::Time now) {
  bool changed = false;
  while (!timers_.empty() && timers_.top().at == now) {
    const Timer timer = timers_.top();
    timers_.pop();
    if (timer.kind == Timer::kTick) {
      // An idle tick (job -1), or a job's growth while its run lasts.
      const bool lapsed =
          timer.job >= 0 && timer.generation != jobs_[timer.job].generation;
      changed = changed || !lapsed;
      continue;
    }
    JobRun& job = jobs_[timer.job];
    if (timer.generation != job.generation) continue;  // superseded
    if (timer.kind == Timer::kCheckpoint) {
      if (absl::Status s = Checkpoint(job, timer.job, now); !s.ok()) return s;
      continue;
    }
    changed = true;
    core::GangReport report;
    report.gang_id = job.gang;
    if (timer.kind == Timer::kComplete) {
      report.state = core::GangState::kSucceeded;
    } else {
      report.preemption_acknowledged = true;
    }
    absl::StatusOr<core::GangPtr> done = scheduler_.Report(report, now);
    // The gang may have left PREEMPTING by itself (grace period over).
    if (!done.ok() && !(timer.kind == Timer::kAck &&
                        absl::IsFailedPrecondition(done.status()))) {
      return absl::InternalError(absl::StrCat("report for ", job.gang.value(),
                                              ": ", done.status().message()));
    }
  }
  while (done_ < static_cast<int64_t>(jobs_.size()) && !node_timers_.empty() &&
         node_timers_.top().at == now) {
    const Timer timer = node_timers_.top();
    node_timers_.pop();
    if (absl::Status s = NodeEvent(timer, now); !s.ok()) return s;
    changed = true;
  }
  return changed;
}

// The launcher's checkpoint: reported like the daemon's ReportGang with
// last_checkpoint_time; the next one is due an interval of run time later,
// unless the run ends first.
absl::Status Engine::Checkpoint(JobRun& job, int index, absl::Time now) {
  core::GangReport report;
  report.gang_id = job.gang;
  report.last_checkpoint_time = now;
  absl::StatusOr<core::GangPtr> done = scheduler_.Report(report, now);
  if (!done.ok()) {
    return absl::InternalError(absl::StrCat("checkpoint of ", job.gang.value(),
                                            ": ", done.status().message()));
  }
  metrics_.AddCheckpoint();
  job.saved = job.run_base + WorkIn(job, now - job.since);
  job.last_checkpoint = now;
  const absl::Time end =
      job.since + WallFor(job, workload_.jobs[index].duration - job.run_base);
  if (now + job.interval < end) {
    timers_.push(
        Timer{now + job.interval, Timer::kCheckpoint, index, job.generation});
  }
  return absl::OkStatus();
}

// A node fails (UNHEALTHY: core repairs or evicts its gangs) or comes back
// (READY), and the next failure is drawn from its stream.
absl::Status Engine::NodeEvent(const Timer& timer, absl::Time now) {
  NodeClock& clock = node_clocks_[timer.job];
  const core::NodeId& id = fleet_.nodes[timer.job].spec.id;
  const bool fail = timer.kind == Timer::kNodeFail;
  const int slot = scheduler_.fleet().Find(id);
  const bool ready = slot >= 0 && scheduler_.fleet().slots()[slot].node.state ==
                                      core::NodeState::kReady;
  if (fail && ready) {
    absl::StatusOr<core::Node> node = scheduler_.SetNodeState(
        id, core::NodeState::kUnhealthy, "simulated failure", now);
    if (!node.ok()) return node.status();
    clock.down = true;
    metrics_.AddNodeFailure();
  } else if (!fail && clock.down) {
    absl::StatusOr<core::Node> node = scheduler_.SetNodeState(
        id, core::NodeState::kReady, "simulated repair", now);
    if (!node.ok()) return node.status();
    clock.down = false;
  }
  if (fail) {
    node_timers_.push(
        Timer{now + options_.node_repair, Timer::kNodeBack, timer.job, 0});
  } else {
    const absl::Duration up = absl::Seconds(
        clock.random.Exponential(absl::ToDoubleSeconds(options_.node_mtbf)));
    node_timers_.push(Timer{now + up, Timer::kNodeFail, timer.job, 0});
  }
  return absl::OkStatus();
}

absl::Status Engine::Arrive(absl::Time now) {
  while (next_arrival_ < arrival_order_.size() &&
         workload_.jobs[arrival_order_[next_arrival_]].submit_time == now) {
    const int index = arrival_order_[next_arrival_++];
    JobRun& job = jobs_[index];
    core::GangSpec spec =
        JobSpec(workload_.jobs[index], workload_.estimates[index], fleet_,
                queue_of_team_[job.team]);
    absl::StatusOr<core::SubmitResult> submitted =
        scheduler_.Submit(std::move(spec), now);
    if (absl::IsFailedPrecondition(submitted.status())) {
      job.phase = Phase::kDone;  // can never fit this fleet
      ++done_;
      continue;
    }
    if (!submitted.ok()) {
      return absl::InternalError(absl::StrCat(
          "submit of trace job ", index, ": ", submitted.status().message()));
    }
    job.gang = submitted->gang->id;
    const int64_t seq = core::GangSeq(job.gang);
    if (static_cast<int64_t>(job_of_seq_.size()) <= seq) {
      job_of_seq_.resize(seq + 1, -1);
    }
    job_of_seq_[seq] = index;
    const core::GangSpec& submitted_spec = submitted->gang->spec;
    const core::GangSpec smallest = core::MinimumSpec(submitted_spec);
    job.pods = smallest.TotalPods();
    job.pending_gpus = smallest.TotalGpus();
    job.held_gpus = submitted_spec.TotalGpus();
    if (core::IsElastic(submitted_spec)) {
      job.full_pods =
          submitted_spec.pod_sets[core::ElasticSetOf(submitted_spec)].count;
      metrics_.AddElasticJob();
    }
    job.phase = Phase::kPending;
    job.since = now;
    AddPending(job, +1);
  }
  return absl::OkStatus();
}

void Engine::HandleEvent(const core::Event& event) {
  if (event.gang == nullptr) return;
  const int64_t seq = core::GangSeq(event.gang->id);
  if (seq <= 0 || seq >= static_cast<int64_t>(job_of_seq_.size())) return;
  const int index = job_of_seq_[seq];
  if (index < 0) return;
  JobRun& job = jobs_[index];
  if (options_.record_events) Record(event, index);
  const bool stops_waiting = event.type == core::EventType::kAdmitted ||
                             event.type == core::EventType::kFailed ||
                             event.type == core::EventType::kCancelled;
  if (stops_waiting) holds_.Leave(index, event.time);
  switch (event.type) {
    case core::EventType::kAdmitted:
      if (!holds_.jobs().empty()) NotePassed(index, *event.gang);
      OnAdmitted(job, index, *event.gang, event.time);
      break;
    case core::EventType::kPreempting:
      if (event.gang->shrink_to > 0) {
        OnShrinking(job, index, event.time);
        break;
      }
      if (holds_.Tracks(index)) NotePreempted(index, *event.gang);
      ++preemptions_[index];
      OnPreempting(job, index, event.time);
      break;
    case core::EventType::kResized:
      OnResized(job, index, *event.gang, event.time);
      break;
    case core::EventType::kRepaired:
      OnRepaired(job, index, *event.gang, event.time);
      break;
    case core::EventType::kEvicted:
      metrics_.AddEviction();
      [[fallthrough]];
    case core::EventType::kRequeued:
      OnRunEnded(job, event.time, /*completed=*/false);
      job.phase = Phase::kPending;
      job.since = event.time;
      AddPending(job, +1);
      break;
    case core::EventType::kSucceeded:
      OnRunEnded(job, event.time, /*completed=*/true);
      metrics_.AddFinished();
      metrics_.AddWait(job.waited, workload_.jobs[index].gpus,
                       workload_.jobs[index].priority);
      waits_[index] = job.waited;
      finishes_[index] = event.time;
      job.phase = Phase::kDone;
      ++done_;
      break;
    case core::EventType::kFailed:
    case core::EventType::kCancelled:
      if (job.phase == Phase::kPending) AddPending(job, -1);
      if (job.phase == Phase::kRunning || job.phase == Phase::kPreempting) {
        OnRunEnded(job, event.time, /*completed=*/false);
      }
      job.phase = Phase::kDone;
      ++done_;
      break;
    default:
      break;
  }
}

void Engine::Record(const core::Event& event, int index) {
  // The decisions only (not SUBMITTED, SUCCEEDED, RUNNING, bookmarks, or
  // any per-checkpoint event core may add).
  switch (event.type) {
    case core::EventType::kAdmitted:
    case core::EventType::kPreempting:
    case core::EventType::kRequeued:
    case core::EventType::kEvicted:
    case core::EventType::kRepaired:
    case core::EventType::kReserved:
    case core::EventType::kFailed:
    case core::EventType::kCancelled:
    case core::EventType::kResized:
      break;
    default:
      return;
  }
  int64_t gpus = 0;
  for (const core::PodPlacement& pod : event.gang->placement) {
    gpus += static_cast<int64_t>(pod.gpu_indices.size());
  }
  if (gpus == 0) gpus = event.gang->spec.TotalGpus();
  events_.push_back(
      EventRecord{event.time, event.type, index, gpus, event.gang->reason});
}

void Engine::OnAdmitted(JobRun& job, int index, const core::Gang& gang,
                        absl::Time now) {
  AddPending(job, -1);
  if (options_.plan_accuracy &&
      static_cast<size_t>(index) < planned_start_.size() &&
      planned_start_[index] && !plan_errors_[index]) {
    plan_errors_[index] = now - *planned_start_[index];
  }
  job.waited += now - job.since;
  if (!first_starts_[index]) first_starts_[index] = now;
  job.since = now;
  job.phase = Phase::kRunning;
  SetRunSize(job, gang);
  if (first_gpus_[index] == 0) first_gpus_[index] = job.held_gpus;
  if (job.size_pods < job.full_pods) metrics_.AddAdmittedBelowFull();
  ++running_;
  TrackGpus(job, index, &gang);
  StartRun(job, index, now);
  ReportRunning(job, now);
  DueToGrow(job, index, now);
}

void Engine::ReportRunning(const JobRun& job, absl::Time now) {
  if (job.full_pods == 0) return;
  // The gang now, not as of the event (a later event of the step may have
  // moved it on).
  const core::GangPtr gang = scheduler_.FindGang(job.gang);
  if (gang == nullptr || gang->state != core::GangState::kAdmitted) return;
  core::GangReport report;
  report.gang_id = job.gang;
  report.state = core::GangState::kRunning;
  absl::StatusOr<core::GangPtr> running = scheduler_.Report(report, now);
  if (!running.ok() && report_error_.ok()) {
    report_error_ =
        absl::InternalError(absl::StrCat("RUNNING report of ", job.gang.value(),
                                         ": ", running.status().message()));
  }
}

void Engine::SetRunSize(JobRun& job, const core::Gang& gang) {
  job.held_gpus = 0;
  for (const core::PodPlacement& pod : gang.placement) {
    job.held_gpus += static_cast<int64_t>(pod.gpu_indices.size());
  }
  if (job.full_pods == 0) return;
  job.size_pods = core::HeldCount(gang, core::ElasticSetOf(gang.spec));
}

// The daemon runs a cycle every cycle_interval, the replay only when
// something is due: so the growth is made due. The tick lapses with the run.
void Engine::DueToGrow(const JobRun& job, int index, absl::Time now) {
  if (job.size_pods >= job.full_pods) return;
  timers_.push(Timer{now + config_.elastic.grow_interval, Timer::kTick, index,
                     job.generation});
}

// A run from the last checkpoint: its completion, and its first checkpoint
// when that comes before the end.
void Engine::StartRun(JobRun& job, int index, absl::Time now) {
  job.since = now;
  job.run_base = job.saved;
  job.last_checkpoint = now;
  const absl::Time end =
      now + WallFor(job, workload_.jobs[index].duration - job.saved);
  timers_.push(Timer{end, Timer::kComplete, index, ++job.generation});
  if (job.interval > absl::ZeroDuration() && now + job.interval < end) {
    timers_.push(
        Timer{now + job.interval, Timer::kCheckpoint, index, job.generation});
  }
}

// Repaired in place after a node failure: the job restarts from its last
// checkpoint on the new placement; the work since then is lost.
void Engine::OnRepaired(JobRun& job, int index, const core::Gang& gang,
                        absl::Time now) {
  if (job.phase != Phase::kRunning && !job.shrinking) return;
  metrics_.AddRepair();
  metrics_.AddRun(job.team, job.held_gpus, job.since, now, job.last_checkpoint);
  TrackGpus(job, index, nullptr);
  TrackGpus(job, index, &gang);
  StartRun(job, index, now);
  ReportRunning(job, now);
  DueToGrow(job, index, now);
  // The restart superseded the pending acknowledgement of a shrink.
  if (job.shrinking) {
    timers_.push(Timer{now + config_.cycle_interval, Timer::kAck, index,
                       job.generation});
  }
}

void Engine::TrackGpus(JobRun& job, int index, const core::Gang* gang) {
  if (!options_.check_gpus) return;
  if (gang == nullptr) {
    for (const core::PodPlacement& pod : job.placement) {
      for (int gpu : pod.gpu_indices) {
        gpu_holder_.erase({pod.node.value(), gpu});
      }
    }
    job.placement.clear();
    return;
  }
  job.placement = gang->placement;
  for (const core::PodPlacement& pod : job.placement) {
    const int slot = scheduler_.fleet().Find(pod.node);
    if (slot < 0 || scheduler_.fleet().slots()[slot].node.state ==
                        core::NodeState::kUnhealthy) {
      gpu_error_ = absl::InternalError(absl::StrCat(
          "trace job ", index, " placed on unhealthy node ", pod.node.value()));
    }
    for (int gpu : pod.gpu_indices) {
      auto [it, added] =
          gpu_holder_.try_emplace({pod.node.value(), gpu}, index);
      if (!added) {
        gpu_error_ = absl::InternalError(
            absl::StrCat("GPU ", gpu, " of ", pod.node.value(),
                         " held by trace jobs ", it->second, " and ", index));
      }
    }
  }
}

void Engine::OnPreempting(JobRun& job, int index, absl::Time now) {
  metrics_.AddPreemption();
  job.phase = Phase::kPreempting;
  const absl::Time ack = now + config_.cycle_interval;
  // A run that ends before the launcher would acknowledge just completes
  // (a run from a checkpoint has only the rest of the work to do).
  const absl::Duration rest = workload_.jobs[index].duration - job.run_base;
  if (job.since + WallFor(job, rest) <= ack) return;
  timers_.push(Timer{ack, Timer::kAck, index, ++job.generation});
}

// The acknowledgement comes as a preemption's does, but the run's
// completion and checkpoints stay due: a run that ends first completes,
// and its acknowledgement is then superseded.
void Engine::OnShrinking(JobRun& job, int index, absl::Time now) {
  job.phase = Phase::kPreempting;
  job.shrinking = true;
  timers_.push(
      Timer{now + config_.cycle_interval, Timer::kAck, index, job.generation});
}

// The work since the last checkpoint is lost, as in a preemption.
void Engine::OnResized(JobRun& job, int index, const core::Gang& gang,
                       absl::Time now) {
  if (job.phase != Phase::kRunning && job.phase != Phase::kPreempting) return;
  const bool shrunk = job.shrinking;
  if (shrunk) {
    metrics_.AddShrink();
  } else {
    metrics_.AddGrow();
  }
  ++resizes_[index];
  metrics_.AddRun(job.team, job.held_gpus, job.since, now, job.last_checkpoint);
  job.phase = Phase::kRunning;
  job.shrinking = false;
  TrackGpus(job, index, nullptr);
  SetRunSize(job, gang);
  TrackGpus(job, index, &gang);
  StartRun(job, index, now);
  DueToGrow(job, index, now);
}

void Engine::OnRunEnded(JobRun& job, absl::Time now, bool completed) {
  metrics_.AddRun(job.team, job.held_gpus, job.since, now,
                  completed ? now : job.last_checkpoint);
  if (!completed) {
    job.saved = job.run_base + WorkIn(job, job.last_checkpoint - job.since);
  }
  job.shrinking = false;
  TrackGpus(job, 0, nullptr);
  ++job.generation;
  --running_;
}

void Engine::AddPending(const JobRun& job, int sign) {
  pending_ += sign;
  if (job.pods > 1) {
    int64_t& gpus = pending_multi_node_[job.pods];
    gpus += sign * job.pending_gpus;
    if (gpus == 0) pending_multi_node_.erase(job.pods);
  }
}

// "Blocked" (bench/README.md, Metrics): a pending multi-node gang is
// blocked while the fleet has at least as many idle whole READY nodes as
// it has pods, counting only nodes nobody else holds: a node reserved for
// another gang, or held for another gang's preemption, is not idle
// capacity this gang could use; a node held for the gang itself is. The
// same rule applies to every policy (those without reservations or
// preemption hold nothing).
FleetSample Engine::Sample() const {
  const core::Fleet& fleet = scheduler_.fleet();
  const core::FleetReport report = core::DescribeFleet(fleet);
  FleetSample s;
  for (const auto& [model, counts] : report.gpus_by_model) {
    s.allocated_gpus += counts.allocated;
  }
  s.pending_gangs = pending_;
  s.running_gangs = running_;
  s.node_fragmentation = report.node_fragmentation;
  // Idle whole nodes held for a gang, by holder (job index).
  std::vector<int> holder(fleet.slots().size(), -1);
  auto hold = [&](const core::GangId& gang, const core::NodeId& node) {
    const int slot = fleet.Find(node);
    const int64_t seq = core::GangSeq(gang);
    if (slot < 0 || seq <= 0 ||
        seq >= static_cast<int64_t>(job_of_seq_.size())) {
      return;
    }
    holder[slot] = job_of_seq_[seq];
  };
  for (const core::Reservation& r : scheduler_.reservations()) {
    for (const core::NodeId& node : r.nodes) hold(r.gang, node);
  }
  for (const auto& [gang, nodes] : scheduler_.held_for()) {
    for (const core::NodeId& node : nodes) hold(gang, node);
  }
  int64_t unheld = 0;
  std::map<int, int64_t> held_idle;  // job index -> idle whole nodes held
  for (size_t i = 0; i < fleet.slots().size(); ++i) {
    const core::Fleet::Slot& slot = fleet.slots()[i];
    if (slot.node.state == core::NodeState::kReady && slot.Idle() &&
        slot.node.spec.gpu_count >= fleet_.gpus_per_node) {
      ++s.free_whole_nodes;
      if (holder[i] < 0) {
        ++unheld;
      } else {
        ++held_idle[holder[i]];
      }
    }
  }
  for (const auto& [pods, gpus] : pending_multi_node_) {
    if (pods > unheld) break;
    s.blocked_gpus += gpus;
  }
  // A holder too large for the unheld nodes alone, with enough of its own.
  for (const auto& [index, nodes] : held_idle) {
    if (index < 0) continue;
    const JobRun& job = jobs_[index];
    if (job.phase == Phase::kPending && job.pods > 1 && job.pods > unheld &&
        job.pods <= unheld + nodes) {
      s.blocked_gpus += job.pending_gpus;
    }
  }
  return s;
}

// Keeps cycles coming while gangs wait and nothing else is due, so that
// time-based eligibility (grace periods, reservations) can act; gives up
// after kMaxIdleCycles such cycles in a row.
void Engine::MaybeTick(absl::Time now) {
  const bool waiting = pending_ > 0 || running_ > 0;
  if (NextTime() || !waiting) {
    idle_cycles_ = 0;
    return;
  }
  if (++idle_cycles_ > kMaxIdleCycles) return;
  const absl::Duration step =
      std::max(config_.cycle_interval, absl::Seconds(1)) *
      (int64_t{1} << std::min(idle_cycles_, 12));
  timers_.push(Timer{now + step, Timer::kTick, -1, 0});
}

// Every tracked job still waiting gets the holders this cycle left it with.
void Engine::ObserveHolds(absl::Time now) {
  for (int index : holds_.jobs()) {
    const JobRun& job = jobs_[index];
    if (job.phase != Phase::kPending || job.gang.empty()) continue;
    const core::GangPtr gang = scheduler_.FindGang(job.gang);
    if (gang == nullptr) continue;
    holds_.Observe(index, now, HoldersOf(*gang));
  }
}

// A gang waiting on its own reservation is held by the gangs running on the
// reserved nodes; a gang that does not fit (or may not backfill) by the
// reservations core holds for other gangs, which stand ahead of it in line.
std::vector<std::string> Engine::HoldersOf(const core::Gang& gang) const {
  const std::string code = core::ReasonCodeName(gang.reason_code);
  switch (gang.reason_code) {
    case core::ReasonCode::kReserved: {
      std::set<int> running;
      for (const core::Reservation& r : scheduler_.reservations()) {
        if (r.gang != gang.id) continue;
        for (const core::NodeId& node : r.nodes) {
          const int slot = scheduler_.fleet().Find(node);
          if (slot < 0) continue;
          for (const core::GangPtr& on : scheduler_.GangsOn(slot)) {
            running.insert(JobOfGang(on->id));
          }
        }
      }
      std::vector<std::string> holders;
      for (int other : running) {
        holders.push_back(
            absl::StrCat("RESERVED, waiting for ", Describe(other), " to end"));
      }
      if (holders.empty()) holders.push_back("RESERVED");
      return holders;
    }
    case core::ReasonCode::kNoFit:
    case core::ReasonCode::kBlockedByReservation:
    case core::ReasonCode::kWaiting:
    case core::ReasonCode::kRequeued:
    case core::ReasonCode::kEvicted: {
      std::vector<std::string> holders;
      for (const core::Reservation& r : scheduler_.reservations()) {
        if (r.gang == gang.id) continue;
        holders.push_back(absl::StrCat(
            code, ", planned ahead: ", Describe(JobOfGang(r.gang))));
      }
      if (holders.empty())
        holders.push_back(absl::StrCat(code, ", no plan ahead"));
      return holders;
    }
    default:
      return {code};
  }
}

// Gangs submitted after a tracked job that is still waiting were admitted
// ahead of it.
void Engine::NotePassed(int index, const core::Gang& gang) {
  const TraceJob& passer = workload_.jobs[index];
  for (int waiting : holds_.jobs()) {
    const JobRun& job = jobs_[waiting];
    const TraceJob& held = workload_.jobs[waiting];
    if (waiting == index || job.phase != Phase::kPending ||
        passer.submit_time <= held.submit_time) {
      continue;
    }
    const char* relation = passer.priority > held.priority    ? "higher"
                           : passer.priority == held.priority ? "same"
                                                              : "lower";
    holds_.Passed(waiting, passer.team, relation, gang.spec.TotalGpus(),
                  passer.duration);
  }
}

// The reason core gives a victim is "PREEMPTED by <gang id>".
void Engine::NotePreempted(int index, const core::Gang& gang) {
  constexpr absl::string_view kPrefix = "PREEMPTED by ";
  int by = -1;
  if (absl::StartsWith(gang.reason, kPrefix)) {
    by = JobOfGang(core::GangId(gang.reason.substr(kPrefix.size())));
  }
  holds_.Preempted(index, by);
}

int Engine::JobOfGang(const core::GangId& id) const {
  const int64_t seq = core::GangSeq(id);
  if (seq <= 0 || seq >= static_cast<int64_t>(job_of_seq_.size())) return -1;
  return job_of_seq_[seq];
}

std::string Engine::Describe(int index) const {
  if (index < 0) return "a gang outside the trace";
  const TraceJob& job = workload_.jobs[index];
  return absl::StrCat("job ", job.line > 0 ? job.line : index, " (", job.team,
                      ", ", job.gpus, " GPUs, priority ", job.priority, ")");
}

}  // namespace

std::vector<absl::Duration> DrawEstimates(const std::vector<TraceJob>& jobs,
                                          uint64_t seed) {
  SimRandom random(seed);
  std::vector<absl::Duration> estimates;
  estimates.reserve(jobs.size());
  for (const TraceJob& job : jobs) {
    const absl::Duration drawn =
        job.duration * random.Uniform(kMinEstimateFactor, kMaxEstimateFactor);
    const absl::Duration unknown =
        job.runtimes_recorded ? absl::ZeroDuration() : drawn;
    estimates.push_back(job.declared_estimate.value_or(
        job.declared_max_runtime.value_or(unknown)));
  }
  return estimates;
}

std::vector<std::string> TeamNames(const std::vector<TraceJob>& jobs) {
  std::set<std::string> names;
  for (const TraceJob& job : jobs) names.insert(job.team);
  return {names.begin(), names.end()};
}

std::vector<core::Queue> TeamQueues(const std::vector<std::string>& teams,
                                    const SimFleet& fleet) {
  std::vector<core::Queue> queues;
  core::Queue cohort;
  cohort.name = core::QueueName("cohort");
  queues.push_back(cohort);
  std::set<std::string> taken = {"cohort"};
  const int n = static_cast<int>(teams.size());
  for (int i = 0; i < n; ++i) {
    std::string name = QueueNameOf(teams[i]);
    for (int k = 2; taken.contains(name); ++k) {
      name = absl::StrCat(QueueNameOf(teams[i]), "-", k);
    }
    taken.insert(name);
    core::Queue queue;
    queue.name = core::QueueName(name);
    queue.parent = cohort.name;
    queue.weight = 1.0;
    for (const auto& [model, gpus] : fleet.GpusByModel()) {
      queue.nominal_gpus[model] = gpus / n + (i < gpus % n ? 1 : 0);
    }
    queues.push_back(std::move(queue));
  }
  return queues;
}

namespace {

// The pod set a job of the plain trace format asks for: up to G GPUs = one
// pod; more = ceil(n / G) pods of G GPUs in the narrowest level they fit.
core::PodSetSpec DerivedPods(const TraceJob& job, const SimFleet& fleet) {
  core::PodSetSpec pods;
  const int g = fleet.gpus_per_node;
  if (job.gpus <= g) {
    pods.count = 1;
    pods.gpus = job.gpus;
    return pods;
  }
  pods.count = (job.gpus + g - 1) / g;
  pods.gpus = g;
  const auto& levels = fleet.levels;
  auto has = [&](const char* level) {
    return std::find(levels.begin(), levels.end(), level) != levels.end();
  };
  if (has("rack") && pods.count <= fleet.nodes_per_rack) {
    pods.topology = {core::TopologyMode::kRequired, "rack"};
  } else if (has("block") && pods.count <= fleet.nodes_per_block) {
    pods.topology = {core::TopologyMode::kRequired, "block"};
  } else if (has("block")) {
    pods.topology = {core::TopologyMode::kPreferred, "block"};
  }
  return pods;
}

// The pod sets of a job whose shape the trace gives (an exported history).
std::vector<core::PodSetSpec> RecordedPods(const TraceJob& job) {
  std::vector<core::PodSetSpec> sets;
  for (const TracePodSet& recorded : job.pod_sets) {
    core::PodSetSpec pods;
    pods.name = absl::StrCat("pods-", sets.size());
    pods.count = recorded.count;
    pods.gpus = recorded.gpus;
    pods.gpu_models = recorded.gpu_models;
    if (!recorded.topology.empty()) {
      const size_t colon = recorded.topology.find(':');
      pods.topology = {recorded.topology.substr(0, colon) == "required"
                           ? core::TopologyMode::kRequired
                           : core::TopologyMode::kPreferred,
                       recorded.topology.substr(colon + 1)};
    }
    sets.push_back(std::move(pods));
  }
  return sets;
}

}  // namespace

core::GangSpec JobSpec(const TraceJob& job, absl::Duration estimate,
                       const SimFleet& fleet, const core::QueueName& queue) {
  core::GangSpec spec;
  spec.queue = queue;
  spec.priority = job.priority;
  spec.estimated_runtime = estimate;
  if (!job.pod_sets.empty()) {
    spec.pod_sets = RecordedPods(job);
  } else {
    core::PodSetSpec pods = DerivedPods(job, fleet);
    pods.name = "pods";
    spec.pod_sets.push_back(std::move(pods));
  }
  if (job.elastic) SetElasticMinimum(spec);
  return spec;
}

absl::StatusOr<ReplayResult> Replay(const core::Config& config,
                                    const SimFleet& fleet,
                                    const Workload& workload,
                                    const ReplayOptions& options) {
  if (workload.estimates.size() != workload.jobs.size()) {
    return absl::InvalidArgumentError("one estimate a job is needed");
  }
  Engine engine(config, fleet, workload, options);
  return engine.Run();
}

}  // namespace phalanx::bench
