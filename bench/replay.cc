#include "bench/replay.h"

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
#include "absl/strings/str_cat.h"
#include "bench/sim_random.h"
#include "core/fleet_report.h"
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
  int pods = 0;
  int64_t held_gpus = 0;  // GPUs of the current run (from its placement)
  Phase phase = Phase::kNotSubmitted;
  absl::Time since;  // pending since, or run start
  absl::Duration waited;
  uint32_t generation = 0;  // bumped whenever a run starts or ends
};

// Something due at a time: a completion, an acknowledgement or an idle tick.
struct Timer {
  enum Kind { kComplete = 0, kAck = 1, kTick = 2 };
  absl::Time at;
  Kind kind;
  int job;
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
  std::optional<absl::Time> NextTime() const;
  absl::Status Step(absl::Time now);
  absl::Status FireTimers(absl::Time now);
  absl::Status Arrive(absl::Time now);
  void HandleEvent(const core::Event& event);
  void Record(const core::Event& event, int index);
  void OnAdmitted(JobRun& job, int index, const core::Gang& gang,
                  absl::Time now);
  void OnPreempting(JobRun& job, int index, absl::Time now);
  void OnRunEnded(JobRun& job, absl::Time now, bool kept);
  void AddPending(const JobRun& job, int sign);
  FleetSample Sample() const;
  void MaybeTick(absl::Time now);

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
  std::vector<int> job_of_seq_;  // gang sequence number -> job index
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  std::map<int, int64_t> pending_multi_node_;  // pods -> GPUs pending
  int64_t pending_ = 0;
  int64_t running_ = 0;
  int64_t done_ = 0;
  int idle_cycles_ = 0;
  MetricsAccumulator metrics_;
  std::vector<EventRecord> events_;
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
               static_cast<int>(teams_.size()), options.bucket_width) {}

absl::Status Engine::Setup() {
  if (absl::Status s = core::ValidateConfig(config_, "config"); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::vector<core::Node>> nodes =
      scheduler_.UpsertNodes(fleet_.nodes);
  if (!nodes.ok()) return nodes.status();
  for (const core::Queue& queue : TeamQueues(teams_, fleet_)) {
    absl::StatusOr<core::Queue> put = scheduler_.PutQueue(queue);
    if (!put.ok()) return put.status();
    if (!queue.parent.empty()) queue_of_team_.push_back(queue.name);
  }
  std::map<std::string, int> team_index;
  for (size_t i = 0; i < teams_.size(); ++i) team_index[teams_[i]] = i;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    jobs_[i].team = team_index.at(workload_.jobs[i].team);
  }
  scheduler_.TakeMutation();
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
  return next;
}

absl::StatusOr<ReplayResult> Engine::Run() {
  if (absl::Status s = Setup(); !s.ok()) return s;
  ReplayResult result;
  std::optional<absl::Time> last;
  FleetSample sample;
  for (std::optional<absl::Time> now = NextTime(); now; now = NextTime()) {
    if (last) metrics_.AddInterval(*last, *now, sample);
    if (absl::Status s = Step(*now); !s.ok()) return s;
    ++result.steps;
    sample = Sample();
    last = now;
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
  return result;
}

absl::Status Engine::Step(absl::Time now) {
  // Completions, then acknowledgements (timer order), then arrivals; then
  // one admission cycle; then the step's events.
  if (absl::Status s = FireTimers(now); !s.ok()) return s;
  if (absl::Status s = Arrive(now); !s.ok()) return s;
  scheduler_.RunCycle(now);
  core::Mutation mutation = scheduler_.TakeMutation();
  for (const core::Event& event : mutation.events) HandleEvent(event);
  return absl::OkStatus();
}

absl::Status Engine::FireTimers(absl::Time now) {
  while (!timers_.empty() && timers_.top().at == now) {
    const Timer timer = timers_.top();
    timers_.pop();
    if (timer.kind == Timer::kTick) continue;
    JobRun& job = jobs_[timer.job];
    if (timer.generation != job.generation) continue;  // superseded
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
    job.pods = submitted->gang->spec.TotalPods();
    job.held_gpus = submitted->gang->spec.TotalGpus();
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
  switch (event.type) {
    case core::EventType::kAdmitted:
      OnAdmitted(job, index, *event.gang, event.time);
      break;
    case core::EventType::kPreempting:
      OnPreempting(job, index, event.time);
      break;
    case core::EventType::kEvicted:
      metrics_.AddEviction();
      [[fallthrough]];
    case core::EventType::kRequeued:
      OnRunEnded(job, event.time, /*kept=*/false);
      job.phase = Phase::kPending;
      job.since = event.time;
      AddPending(job, +1);
      break;
    case core::EventType::kSucceeded:
      OnRunEnded(job, event.time, /*kept=*/true);
      metrics_.AddFinished();
      metrics_.AddWait(job.waited, workload_.jobs[index].gpus,
                       workload_.jobs[index].priority);
      job.phase = Phase::kDone;
      ++done_;
      break;
    case core::EventType::kFailed:
    case core::EventType::kCancelled:
      if (job.phase == Phase::kPending) AddPending(job, -1);
      if (job.phase == Phase::kRunning || job.phase == Phase::kPreempting) {
        OnRunEnded(job, event.time, /*kept=*/false);
      }
      job.phase = Phase::kDone;
      ++done_;
      break;
    default:
      break;
  }
}

void Engine::Record(const core::Event& event, int index) {
  if (event.type == core::EventType::kSubmitted ||
      event.type == core::EventType::kSucceeded ||
      event.type == core::EventType::kRunning ||
      event.type == core::EventType::kBookmark) {
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
  job.waited += now - job.since;
  job.since = now;
  job.phase = Phase::kRunning;
  job.held_gpus = 0;
  for (const core::PodPlacement& pod : gang.placement) {
    job.held_gpus += static_cast<int64_t>(pod.gpu_indices.size());
  }
  ++running_;
  timers_.push(Timer{now + workload_.jobs[index].duration, Timer::kComplete,
                     index, ++job.generation});
}

void Engine::OnPreempting(JobRun& job, int index, absl::Time now) {
  metrics_.AddPreemption();
  job.phase = Phase::kPreempting;
  const absl::Time ack = now + config_.cycle_interval;
  // A run that ends before the launcher would acknowledge just completes.
  if (job.since + workload_.jobs[index].duration <= ack) return;
  timers_.push(Timer{ack, Timer::kAck, index, ++job.generation});
}

void Engine::OnRunEnded(JobRun& job, absl::Time now, bool kept) {
  metrics_.AddRun(job.team, job.held_gpus, job.since, now, kept);
  ++job.generation;
  --running_;
}

void Engine::AddPending(const JobRun& job, int sign) {
  pending_ += sign;
  if (job.pods > 1) {
    int64_t& gpus = pending_multi_node_[job.pods];
    gpus += sign * job.held_gpus;
    if (gpus == 0) pending_multi_node_.erase(job.pods);
  }
}

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
  for (const core::Fleet::Slot& slot : fleet.slots()) {
    if (slot.node.state == core::NodeState::kReady && slot.Idle() &&
        slot.node.spec.gpu_count >= fleet_.gpus_per_node) {
      ++s.free_whole_nodes;
    }
  }
  for (const auto& [pods, gpus] : pending_multi_node_) {
    if (pods > s.free_whole_nodes) break;
    s.blocked_gpus += gpus;
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

}  // namespace

std::vector<absl::Duration> DrawEstimates(const std::vector<TraceJob>& jobs,
                                          uint64_t seed) {
  SimRandom random(seed);
  std::vector<absl::Duration> estimates;
  estimates.reserve(jobs.size());
  for (const TraceJob& job : jobs) {
    estimates.push_back(job.duration *
                        random.Uniform(kMinEstimateFactor, kMaxEstimateFactor));
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

core::GangSpec JobSpec(const TraceJob& job, absl::Duration estimate,
                       const SimFleet& fleet, const core::QueueName& queue) {
  core::GangSpec spec;
  spec.queue = queue;
  spec.priority = job.priority;
  spec.estimated_runtime = estimate;
  core::PodSetSpec pods;
  pods.name = "pods";
  const int g = fleet.gpus_per_node;
  if (job.gpus <= g) {
    pods.count = 1;
    pods.gpus = job.gpus;
  } else {
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
  }
  spec.pod_sets.push_back(std::move(pods));
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
