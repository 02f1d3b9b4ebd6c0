// phalanx-sim: replays a trace (or a synthetic LLM-lab workload) through
// core::Scheduler on a virtual clock under several policies and writes
// summary.json, summary.md, per-policy time series and a plot.
// See bench/README.md.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/flags.h"
#include "bench/sim/compare.h"
#include "bench/sim/elastic_jobs.h"
#include "bench/sim/progress.h"
#include "bench/sim/replay.h"
#include "bench/sim/report.h"
#include "bench/sim/sim_fleet.h"
#include "bench/sim/sim_policies.h"
#include "bench/sim/synthetic.h"
#include "bench/sim/trace.h"
#include "bench/sim/whatif.h"

ABSL_FLAG(std::string, trace, "",
          "CSV trace: timestamp,duration,num_gpus,cluster[,priority]");
ABSL_FLAG(std::string, synthetic, "",
          "seed of the synthetic LLM-lab workload (instead of --trace)");
ABSL_FLAG(double, days, 14, "days of synthetic arrivals");
ABSL_FLAG(std::string, profile, "lab",
          "synthetic mix: lab, or half-fleet (pretrain gangs of 1/4 and 1/2 "
          "of the fleet)");
ABSL_FLAG(double, load, 0.95,
          "synthetic mean demand as a fraction of the fleet's GPUs");
ABSL_FLAG(uint64_t, seed, 1, "seed of the runtime estimates");
ABSL_FLAG(double, elastic_fraction, 0,
          "share (0..1) of the gangs of >= 64 GPUs that may run on half their "
          "pods with the same work, chosen from the synthetic seed (else "
          "--seed); 0 = none");
ABSL_FLAG(int64_t, max_jobs, 0,
          "replay only the first N jobs by submit time (0 = all)");
ABSL_FLAG(int, nodes, 256, "nodes in the fleet");
ABSL_FLAG(int, gpus_per_node, 8, "GPUs a node");
ABSL_FLAG(int, nodes_per_rack, 16, "nodes a rack");
ABSL_FLAG(int, racks_per_block, 4, "racks a block");
ABSL_FLAG(std::string, gpu_model, "H100", "GPU model of every node");
ABSL_FLAG(std::string, fleet, "",
          "fleet file (proto3 JSON of phalanx.v1.UpsertNodesRequest) instead "
          "of --nodes etc.");
constexpr char kDefaultPolicies[] =
    "fifo,kueue-like,slurm-like,slurm-default,phalanx";
ABSL_FLAG(std::string, policies, "",
          "comma list of policies to compare (default "
          "fifo,kueue-like,slurm-like,slurm-default,phalanx; with --config: "
          "none unless given)");
ABSL_FLAG(std::string, config, "",
          "comma list of daemon configuration files (`phalanxctl config get` "
          "output), each replayed as a policy named by its file's base name");
ABSL_FLAG(std::string, queues, "",
          "the daemon's queues (`phalanxctl queues list -o json` output): "
          "every job's cluster names one of them; default one queue a team");
ABSL_FLAG(std::string, out, "sim-out", "output directory");
ABSL_FLAG(int, jobs, 2,
          "policies replayed at once, each on its own thread with its own "
          "scheduler (results are the same as one at a time)");
ABSL_FLAG(bool, plot, true, "draw plot.png with --python and --plot_script");
ABSL_FLAG(std::string, python, "/usr/bin/python3", "Python with matplotlib");
ABSL_FLAG(std::string, plot_script, PHALANX_SIM_PLOT_SCRIPT,
          "bench/sim/plot.py");
ABSL_FLAG(bool, progress, true, "progress bar on stderr for long replays");
ABSL_FLAG(double, max_policy_seconds, 0,
          "stop a policy's replay after this much wall time and report it "
          "as not finished (0 = no limit)");
ABSL_FLAG(absl::Duration, checkpoint_interval, absl::Minutes(30),
          "run time between a job's checkpoints (0 = never); a trace's "
          "checkpoint_interval_s column overrides it per job");
ABSL_FLAG(double, node_mtbf_hours, 0,
          "mean time between failures of one node, hours (0 = no failures)");
ABSL_FLAG(double, node_repair_hours, 4,
          "hours a failed node stays UNHEALTHY before it is READY again");
ABSL_FLAG(uint64_t, failure_seed, 1, "seed of the node failure times");
ABSL_FLAG(bool, exact_estimates, false,
          "every job's estimated_runtime is its actual run time (instead of "
          "actual x U[0.5, 3])");
ABSL_FLAG(bool, plan_accuracy, false,
          "read the plan just after each submit and write plan-accuracy.md: "
          "how far each job's planned start was from its first start");
ABSL_FLAG(std::string, compare, "",
          "A,B: replay policies A and B (instead of --policies), write "
          "compare.csv (every job's wait under each) and compare.md (what "
          "held the jobs that waited longest more under A)");
ABSL_FLAG(int, compare_top, 10,
          "with --compare: how many jobs compare.md explains");
ABSL_FLAG(bool, event_log, false,
          "also write events-<policy>.csv: every admission, preemption, "
          "requeue and eviction with the gang's reason");

namespace phalanx::bench {
namespace {

absl::StatusOr<SimFleet> LoadFleet() {
  if (!absl::GetFlag(FLAGS_fleet).empty()) {
    return ReadFleetFile(absl::GetFlag(FLAGS_fleet));
  }
  FleetOptions options;
  options.nodes = absl::GetFlag(FLAGS_nodes);
  options.gpus_per_node = absl::GetFlag(FLAGS_gpus_per_node);
  options.nodes_per_rack = absl::GetFlag(FLAGS_nodes_per_rack);
  options.racks_per_block = absl::GetFlag(FLAGS_racks_per_block);
  options.gpu_model = absl::GetFlag(FLAGS_gpu_model);
  return MakeFleet(options);
}

// The jobs (file order) and the meta fields that describe them.
absl::StatusOr<std::vector<TraceJob>> LoadJobs(const SimFleet& fleet,
                                               RunMeta& meta) {
  const std::string trace = absl::GetFlag(FLAGS_trace);
  const std::string synthetic = absl::GetFlag(FLAGS_synthetic);
  if (trace.empty() == synthetic.empty()) {
    return absl::InvalidArgumentError(
        "give exactly one of --trace FILE and --synthetic SEED");
  }
  const double elastic = absl::GetFlag(FLAGS_elastic_fraction);
  if (!(elastic >= 0 && elastic <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--elastic_fraction: ", elastic, " is not in [0, 1]"));
  }
  std::vector<TraceJob> jobs;
  if (!trace.empty()) {
    meta.trace = trace;
    absl::StatusOr<std::vector<TraceJob>> read = ReadTrace(trace);
    if (!read.ok()) return read.status();
    jobs = *std::move(read);
  } else {
    SyntheticOptions options;
    if (!absl::SimpleAtoi(synthetic, &options.seed)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--synthetic: \"", synthetic, "\" is not a seed"));
    }
    options.days = absl::GetFlag(FLAGS_days);
    options.load = absl::GetFlag(FLAGS_load);
    const std::string profile = absl::GetFlag(FLAGS_profile);
    if (profile == "half-fleet") {
      options.profile = SyntheticProfile::kHalfFleet;
      meta.synthetic_profile = profile;
    } else if (profile != "lab") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--profile: \"", profile.substr(0, 64), "\" is lab or half-fleet"));
    }
    options.fleet_gpus = fleet.TotalGpus();
    // The half-fleet profile sizes its largest gangs by the fleet.
    if (options.profile == SyntheticProfile::kHalfFleet) {
      options.max_gang_gpus = static_cast<int>(fleet.TotalGpus());
    }
    options.max_gang_gpus = static_cast<int>(
        std::min<int64_t>(options.max_gang_gpus, fleet.TotalGpus()));
    meta.trace = "synthetic";
    meta.synthetic_seed = options.seed;
    meta.synthetic_days = options.days;
    meta.synthetic_load = options.load;
    options.elastic_fraction = elastic;
    jobs = GenerateSynthetic(options);
  }
  meta.elastic_fraction = elastic;
  if (!trace.empty() && elastic > 0) {
    MakeElastic(jobs, elastic, absl::GetFlag(FLAGS_seed));
  }
  const int64_t max_jobs = absl::GetFlag(FLAGS_max_jobs);
  if (max_jobs > 0 && static_cast<int64_t>(jobs.size()) > max_jobs) {
    std::stable_sort(jobs.begin(), jobs.end(),
                     [](const TraceJob& a, const TraceJob& b) {
                       return a.submit_time < b.submit_time;
                     });
    jobs.resize(max_jobs);
  }
  if (jobs.empty()) return absl::InvalidArgumentError("the trace has no jobs");
  return jobs;
}

void DescribeRun(const SimFleet& fleet, const Workload& workload,
                 RunMeta& meta) {
  meta.seed = absl::GetFlag(FLAGS_seed);
  meta.checkpoint_interval_s =
      absl::ToDoubleSeconds(absl::GetFlag(FLAGS_checkpoint_interval));
  meta.node_mtbf_hours = absl::GetFlag(FLAGS_node_mtbf_hours);
  meta.node_repair_hours = absl::GetFlag(FLAGS_node_repair_hours);
  meta.failure_seed = absl::GetFlag(FLAGS_failure_seed);
  meta.jobs = static_cast<int64_t>(workload.jobs.size());
  meta.teams = static_cast<int64_t>(TeamNames(workload.jobs).size());
  auto [first, last] =
      std::minmax_element(workload.jobs.begin(), workload.jobs.end(),
                          [](const TraceJob& a, const TraceJob& b) {
                            return a.submit_time < b.submit_time;
                          });
  meta.first_submit = first->submit_time;
  meta.last_submit = last->submit_time;
  meta.fleet_source = fleet.source;
  meta.nodes = static_cast<int64_t>(fleet.nodes.size());
  meta.gpus = fleet.TotalGpus();
  meta.gpus_per_node = fleet.gpus_per_node;
  meta.nodes_per_rack = fleet.nodes_per_rack;
  meta.nodes_per_block = fleet.nodes_per_block;
  meta.levels = fleet.levels;
  meta.gpus_by_model = fleet.GpusByModel();
}

// About 1,500 buckets over the arrival window, whole minutes, at least one.
absl::Duration BucketWidth(const RunMeta& meta) {
  const absl::Duration window = meta.last_submit - meta.first_submit;
  return std::max(absl::Minutes(1),
                  absl::Trunc(window / 1500, absl::Minutes(1)));
}

// Replays `workload` under `config` with a progress bar, stopping at the
// --max-policy-seconds limit (Cancelled); gathers the holders of
// `explain_jobs`.
absl::StatusOr<ReplayResult> ReplayWithProgress(
    const std::string& name, const core::Config& config, const SimFleet& fleet,
    const Workload& workload, const RunMeta& meta, absl::Time start,
    std::vector<int> explain_jobs = {}) {
  ProgressBar bar(name, absl::GetFlag(FLAGS_progress)
                            ? absl::Seconds(2)
                            : absl::InfiniteDuration());
  const double limit = absl::GetFlag(FLAGS_max_policy_seconds);
  const absl::Time deadline =
      limit > 0 ? start + absl::Seconds(limit) : absl::InfiniteFuture();
  ReplayOptions options;
  options.bucket_width = BucketWidth(meta);
  options.record_events = absl::GetFlag(FLAGS_event_log);
  options.checkpoint_interval = absl::GetFlag(FLAGS_checkpoint_interval);
  options.node_mtbf = absl::Hours(absl::GetFlag(FLAGS_node_mtbf_hours));
  options.node_repair = absl::Hours(absl::GetFlag(FLAGS_node_repair_hours));
  options.failure_seed = absl::GetFlag(FLAGS_failure_seed);
  options.explain_jobs = std::move(explain_jobs);
  options.plan_accuracy = absl::GetFlag(FLAGS_plan_accuracy);
  options.progress = [&](int64_t done, int64_t total) {
    bar.Update(done, total);
    return absl::Now() < deadline;  // one clock read a cycle: negligible
  };
  return Replay(config, fleet, workload, options);
}

// Runs one policy: unavailable, not finished, or its metrics and series.
absl::StatusOr<PolicyOutcome> RunPolicy(const NamedConfig& policy,
                                        const SimFleet& fleet,
                                        const Workload& workload,
                                        const RunMeta& meta) {
  const std::string& name = policy.name;
  PolicyOutcome outcome;
  outcome.name = name;
  const absl::Time start = absl::Now();
  absl::StatusOr<ReplayResult> result =
      ReplayWithProgress(name, policy.config, fleet, workload, meta, start);
  if (absl::IsCancelled(result.status())) {
    outcome.not_finished = true;
    outcome.unavailable_reason = absl::StrFormat(
        "--max-policy-seconds %g reached, %s",
        absl::GetFlag(FLAGS_max_policy_seconds), result.status().message());
    std::fprintf(stderr, "%-12s not finished: %s\n", name.c_str(),
                 outcome.unavailable_reason.c_str());
    return outcome;
  }
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat(name, ": ", result.status().message()));
  }
  outcome.metrics = result->metrics;
  // Before the per-job vectors move out of `result`.
  if (result->metrics.elastic_jobs > 0) {
    outcome.elastic_csv = ElasticCsv(workload.jobs, *result, meta.first_submit);
  }
  outcome.metrics->sim_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  outcome.series = std::move(result->series);
  outcome.waits = std::move(result->waits);
  outcome.plan_errors = std::move(result->plan_errors);
  outcome.first_starts = std::move(result->first_starts);
  outcome.preemptions = std::move(result->preemptions);
  if (!result->events.empty()) {
    outcome.events_csv =
        EventsCsv(result->events, workload.jobs, meta.first_submit);
  }
  std::fprintf(stderr, "%-12s %.1f s, %lld cycles, %lld/%lld jobs finished\n",
               name.c_str(), outcome.metrics->sim_seconds,
               static_cast<long long>(result->steps),
               static_cast<long long>(outcome.metrics->finished),
               static_cast<long long>(outcome.metrics->jobs));
  return outcome;
}

// Replays `outcome`'s policy again gathering the holders of `jobs`, and
// checks that it decided alike (the same waits).
absl::StatusOr<std::vector<HoldReport>> HoldersUnder(
    const PolicyOutcome& outcome, const core::Config& config,
    const std::vector<int>& jobs, const SimFleet& fleet,
    const Workload& workload, const RunMeta& meta) {
  absl::StatusOr<ReplayResult> again =
      ReplayWithProgress(outcome.name + " (holders)", config, fleet, workload,
                         meta, absl::Now(), jobs);
  if (!again.ok()) return again.status();
  if (again->waits != outcome.waits) {
    return absl::InternalError(
        absl::StrCat("--compare: gathering holders under ", outcome.name,
                     " changed a decision (the waits differ)"));
  }
  return std::move(again->holds);
}

// With --compare A,B: finds the jobs that waited longest more under A,
// gathers what held them under A and under B, and writes compare.csv and
// compare.md into `out`.
absl::Status WriteComparison(const std::string& out, const SimFleet& fleet,
                             const Workload& workload, const RunMeta& meta,
                             const std::vector<NamedConfig>& policies,
                             const std::vector<PolicyOutcome>& outcomes) {
  const PolicyOutcome& a = outcomes[0];
  const PolicyOutcome& b = outcomes[1];
  if (!a.metrics || !b.metrics) {
    return absl::FailedPreconditionError(
        "--compare: both policies must finish (see --max-policy-seconds)");
  }
  const std::vector<int> worse = WaitedLongerUnderA(
      a.waits, b.waits, std::max(0, absl::GetFlag(FLAGS_compare_top)));
  absl::StatusOr<std::vector<HoldReport>> under_a =
      HoldersUnder(a, policies[0].config, worse, fleet, workload, meta);
  if (!under_a.ok()) return under_a.status();
  absl::StatusOr<std::vector<HoldReport>> under_b =
      HoldersUnder(b, policies[1].config, worse, fleet, workload, meta);
  if (!under_b.ok()) return under_b.status();
  if (absl::Status s =
          WriteFile(absl::StrCat(out, "/compare.csv"),
                    CompareCsv(a.name, b.name, workload.jobs, a.waits, b.waits,
                               meta.first_submit));
      !s.ok()) {
    return s;
  }
  return WriteFile(absl::StrCat(out, "/compare.md"),
                   CompareMarkdown(a.name, b.name, workload.jobs, a.waits,
                                   b.waits, *under_a, *under_b, /*top=*/8));
}

// The policy names to replay: --compare's two, else --policies (none when
// --config is given and --policies is not).
absl::StatusOr<std::vector<std::string>> PolicyList() {
  const std::string compare = absl::GetFlag(FLAGS_compare);
  if (compare.empty()) {
    std::string policies = absl::GetFlag(FLAGS_policies);
    if (policies.empty()) {
      if (!absl::GetFlag(FLAGS_config).empty()) {
        return std::vector<std::string>();
      }
      policies = kDefaultPolicies;
    }
    return std::vector<std::string>(
        absl::StrSplit(policies, ',', absl::SkipEmpty()));
  }
  std::vector<std::string> names = absl::StrSplit(compare, ',');
  if (names.size() != 2 || names[0].empty() || names[1].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--compare: \"", compare.substr(0, 64), "\" is not A,B"));
  }
  return names;
}

// The --config files, by name.
absl::StatusOr<std::vector<NamedConfig>> ConfigFiles() {
  std::vector<NamedConfig> configs;
  for (absl::string_view path :
       absl::StrSplit(absl::GetFlag(FLAGS_config), ',', absl::SkipEmpty())) {
    absl::StatusOr<NamedConfig> config = ReadConfigFile(std::string(path));
    if (!config.ok()) {
      return absl::Status(
          config.status().code(),
          absl::StrCat("--config: ", config.status().message()));
    }
    for (const NamedConfig& other : configs) {
      if (other.name == config->name) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--config: two files are named \"", config->name, "\""));
      }
    }
    configs.push_back(*std::move(config));
  }
  return configs;
}

// The configurations to replay, in report order: with --compare its two
// (each a --config file's name or a policy), else the --config files, then
// the --policies.
absl::StatusOr<std::vector<NamedConfig>> Candidates(const SimFleet& fleet) {
  absl::StatusOr<std::vector<NamedConfig>> files = ConfigFiles();
  if (!files.ok()) return files.status();
  absl::StatusOr<std::vector<std::string>> names = PolicyList();
  if (!names.ok()) return names.status();
  std::vector<NamedConfig> candidates;
  if (absl::GetFlag(FLAGS_compare).empty()) candidates = *files;
  core::Config base;
  base.topology_levels = fleet.levels;
  for (const std::string& name : *names) {
    auto file =
        std::find_if(files->begin(), files->end(),
                     [&](const NamedConfig& c) { return c.name == name; });
    if (file != files->end()) {
      candidates.push_back(*file);
      continue;
    }
    absl::StatusOr<core::Config> config = PolicyConfig(name, base);
    if (!config.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--policies: ", config.status().message()));
    }
    candidates.push_back(NamedConfig{name, *std::move(config)});
  }
  if (candidates.empty()) {
    return absl::InvalidArgumentError("no policy or --config to replay");
  }
  return candidates;
}

// The fleet and the workload, with the queues of --queues when given.
absl::Status LoadWorkload(const SimFleet& fleet, Workload& workload,
                          RunMeta& meta,
                          const std::vector<NamedConfig>& candidates) {
  if (!absl::GetFlag(FLAGS_queues).empty()) {
    absl::StatusOr<std::vector<core::Queue>> queues =
        ReadQueuesFile(absl::GetFlag(FLAGS_queues));
    if (!queues.ok()) {
      return absl::Status(
          queues.status().code(),
          absl::StrCat("--queues: ", queues.status().message()));
    }
    workload.queues = *std::move(queues);
  }
  absl::StatusOr<std::vector<TraceJob>> jobs = LoadJobs(fleet, meta);
  if (!jobs.ok()) return jobs.status();
  workload.jobs = *std::move(jobs);
  // An exported history's runs still open run as long as the daemon's plan
  // expects (the first candidate's planning.default_runtime).
  ResolveOpenRuns(workload.jobs,
                  candidates.front().config.planning.default_runtime);
  workload.estimates = DrawEstimates(workload.jobs, absl::GetFlag(FLAGS_seed));
  if (absl::GetFlag(FLAGS_exact_estimates)) {
    for (size_t i = 0; i < workload.jobs.size(); ++i) {
      workload.estimates[i] = workload.jobs[i].duration;
    }
  }
  DescribeRun(fleet, workload, meta);
  return absl::OkStatus();
}

// Each candidate replays on its own core::Scheduler and shares only the
// read-only fleet, workload and meta, so candidates run on --jobs threads
// and are reported in the order given.
absl::StatusOr<std::vector<PolicyOutcome>> RunAll(
    const std::vector<NamedConfig>& candidates, const SimFleet& fleet,
    const Workload& workload, const RunMeta& meta) {
  std::vector<std::optional<absl::StatusOr<PolicyOutcome>>> results(
      candidates.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < candidates.size(); i = next++) {
      results[i] = RunPolicy(candidates[i], fleet, workload, meta);
    }
  };
  const int threads_wanted = std::clamp<int>(
      absl::GetFlag(FLAGS_jobs), 1, static_cast<int>(candidates.size()));
  std::vector<std::thread> threads;
  for (int t = 1; t < threads_wanted; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& thread : threads) thread.join();
  std::vector<PolicyOutcome> outcomes;
  for (auto& result : results) {
    if (!result->ok()) return result->status();
    outcomes.push_back(**std::move(result));
  }
  return outcomes;
}

// Writes `md` to out/`file` and prints it.
absl::Status WriteAndPrint(const std::string& out, absl::string_view file,
                           const std::string& md) {
  if (absl::Status s = WriteFile(absl::StrCat(out, "/", file), md); !s.ok()) {
    return s;
  }
  std::fputs(md.c_str(), stdout);
  return absl::OkStatus();
}

// plan-accuracy.md (with --plan-accuracy), start-accuracy.md and
// starts.csv (when the trace recorded first starts), queues.md and
// queues.csv.
absl::Status WriteJobReports(const std::string& out, const SimFleet& fleet,
                             const Workload& workload,
                             const std::vector<PolicyOutcome>& outcomes) {
  std::vector<int64_t> gpus;
  bool recorded_starts = false;
  for (const TraceJob& job : workload.jobs) {
    gpus.push_back(
        JobSpec(job, absl::ZeroDuration(), fleet, core::QueueName("q"))
            .TotalGpus());
    recorded_starts = recorded_starts || job.recorded_start.has_value();
  }
  if (absl::GetFlag(FLAGS_plan_accuracy)) {
    absl::Status s = WriteAndPrint(out, "plan-accuracy.md",
                                   PlanAccuracyMarkdown(outcomes, gpus));
    if (!s.ok()) return s;
  }
  if (recorded_starts) {
    std::vector<std::vector<std::optional<absl::Duration>>> errors;
    for (const PolicyOutcome& outcome : outcomes) {
      errors.push_back(StartErrors(workload.jobs, outcome));
    }
    absl::Status s = WriteAndPrint(
        out, "start-accuracy.md",
        AbsErrorBySizeMarkdown(outcomes, errors, gpus,
                               "jobs started in the history and the replay"));
    if (!s.ok()) return s;
    s = WriteFile(absl::StrCat(out, "/starts.csv"),
                  StartsCsv(workload.jobs, outcomes));
    if (!s.ok()) return s;
  }
  if (absl::Status s = WriteFile(absl::StrCat(out, "/queues.csv"),
                                 QueuesCsv(workload.jobs, outcomes));
      !s.ok()) {
    return s;
  }
  return WriteFile(absl::StrCat(out, "/queues.md"),
                   QueuesMarkdown(workload.jobs, outcomes));
}

absl::Status CheckReplayFlags() {
  if (absl::GetFlag(FLAGS_checkpoint_interval) < absl::ZeroDuration() ||
      absl::GetFlag(FLAGS_node_mtbf_hours) < 0 ||
      absl::GetFlag(FLAGS_node_repair_hours) <= 0) {
    return absl::InvalidArgumentError(
        "--checkpoint-interval and --node-mtbf-hours must be >= 0, "
        "--node-repair-hours > 0");
  }
  return absl::OkStatus();
}

absl::Status Main() {
  if (absl::Status s = CheckReplayFlags(); !s.ok()) return s;
  absl::StatusOr<SimFleet> fleet = LoadFleet();
  if (!fleet.ok()) return fleet.status();
  absl::StatusOr<std::vector<NamedConfig>> candidates = Candidates(*fleet);
  if (!candidates.ok()) return candidates.status();
  RunMeta meta;
  Workload workload;
  if (absl::Status s = LoadWorkload(*fleet, workload, meta, *candidates);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::vector<PolicyOutcome>> outcomes =
      RunAll(*candidates, *fleet, workload, meta);
  if (!outcomes.ok()) return outcomes.status();
  const std::string out = absl::GetFlag(FLAGS_out);
  if (absl::Status s = WriteReports(out, meta, *outcomes); !s.ok()) return s;
  if (absl::Status s = WriteJobReports(out, *fleet, workload, *outcomes);
      !s.ok()) {
    return s;
  }
  if (!absl::GetFlag(FLAGS_compare).empty()) {
    absl::Status s =
        WriteComparison(out, *fleet, workload, meta, *candidates, *outcomes);
    if (!s.ok()) return s;
  }
  std::string plot;
  if (absl::GetFlag(FLAGS_plot)) {
    absl::Status s = RunPlot(absl::GetFlag(FLAGS_python),
                             absl::GetFlag(FLAGS_plot_script), out);
    if (s.ok()) {
      plot = ", plot.png";
    } else {
      std::fprintf(stderr, "no plot: %s\n", std::string(s.message()).c_str());
    }
  }
  std::fputs(SummaryMarkdown(meta, *outcomes).c_str(), stdout);
  std::fprintf(stderr,
               "wrote %s/: summary.json, summary.md, queues.md, "
               "timeseries-*.csv%s\n",
               out.c_str(), plot.c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace phalanx::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "phalanx-sim (--trace FILE | --synthetic SEED [--days D]) [--seed N] "
      "[--nodes N --gpus-per-node G --nodes-per-rack R --racks-per-block B "
      "--gpu-model M | --fleet FILE] [--policies a,b] [--out DIR]");
  std::vector<std::string> args =
      phalanx::bench::UnderscoreFlagNames(argc, argv);
  std::vector<char*> argv2;
  for (std::string& arg : args) argv2.push_back(arg.data());
  absl::ParseCommandLine(static_cast<int>(argv2.size()), argv2.data());
  if (absl::Status s = phalanx::bench::Main(); !s.ok()) {
    std::fprintf(stderr, "phalanx-sim: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
