#include "bench/sim/synthetic.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>

#include "bench/sim/elastic_jobs.h"
#include "bench/sim/sim_random.h"

namespace phalanx::bench {
namespace {

// One kind of job: how often it comes, its shape, who submits it.
struct Kind {
  double share;  // of arrivals
  std::vector<std::pair<int, double>> gpus;
  double median_seconds;
  double sigma;  // of log(duration)
  double min_seconds;
  double cap_seconds;
  std::vector<std::pair<int, double>> priorities;
  std::vector<std::pair<std::string, double>> teams;
  bool working_day;  // arrivals follow the working-day cycle
};

constexpr double kHour = 3600;
constexpr double kDay = 24 * kHour;

const std::vector<Kind>& Kinds() {
  static const std::vector<Kind>* kinds = new std::vector<Kind>{
      // debug: interactive and smoke-test jobs.
      {0.55,
       {{1, 0.3}, {2, 0.1}, {4, 0.2}, {8, 0.4}},
       15 * 60,
       1.0,
       60,
       6 * kHour,
       {{0, 1.0}},
       {{"research", 0.5},
        {"posttrain", 0.15},
        {"multimodal", 0.15},
        {"pretrain", 0.1},
        {"eval", 0.1}},
       true},
      // eval: benchmark sweeps over checkpoints; some block a release.
      {0.30,
       {{8, 0.4}, {16, 0.3}, {32, 0.2}, {64, 0.1}},
       kHour,
       0.8,
       5 * 60,
       12 * kHour,
       {{0, 0.9}, {1, 0.1}},
       {{"eval", 0.5},
        {"posttrain", 0.2},
        {"research", 0.15},
        {"pretrain", 0.1},
        {"multimodal", 0.05}},
       true},
      // finetune: SFT / RL runs of a few nodes to a rack or two.
      {0.13,
       {{16, 0.15}, {32, 0.25}, {64, 0.3}, {128, 0.2}, {256, 0.1}},
       6 * kHour,
       0.9,
       10 * 60,
       3 * kDay,
       {{0, 0.9}, {1, 0.1}},
       {{"posttrain", 0.5},
        {"multimodal", 0.2},
        {"research", 0.2},
        {"pretrain", 0.1}},
       false},
      // pretrain: long multi-block runs; flagship runs are high priority.
      {0.02,
       {{256, 0.4}, {512, 0.4}, {1024, 0.2}},
       kDay,
       0.7,
       kHour,
       14 * kDay,
       {{0, 0.75}, {2, 0.25}},
       {{"pretrain", 0.7}, {"multimodal", 0.3}},
       false},
  };
  return *kinds;
}

// The kinds of `options.profile`. Half-fleet: pretrain runs of a quarter
// and half of the fleet (70 % the half), 3 % of arrivals instead of 2 %.
std::vector<Kind> KindsOf(const SyntheticOptions& options) {
  std::vector<Kind> kinds = Kinds();
  if (options.profile == SyntheticProfile::kHalfFleet) {
    Kind& pretrain = kinds.back();
    const int half = std::max(2, static_cast<int>(options.fleet_gpus / 2));
    pretrain.share = 0.03;
    pretrain.gpus = {{half / 2, 0.3}, {half, 0.7}};
  }
  return kinds;
}

std::vector<std::pair<int, double>> KindShares(const std::vector<Kind>& kinds) {
  std::vector<std::pair<int, double>> shares;
  for (size_t i = 0; i < kinds.size(); ++i) {
    shares.emplace_back(static_cast<int>(i), kinds[i].share);
  }
  return shares;
}

// Draws the shape of one job of `kind` (everything but the submit time).
TraceJob DrawJob(const Kind& kind, int max_gang_gpus, SimRandom& random) {
  TraceJob job;
  job.gpus = std::min(kind.gpus[random.Pick(kind.gpus)].first, max_gang_gpus);
  const double seconds = std::clamp(
      std::round(kind.median_seconds * std::exp(kind.sigma * random.Normal())),
      kind.min_seconds, kind.cap_seconds);
  job.duration = absl::Seconds(seconds);
  job.team = kind.teams[random.Pick(kind.teams)].first;
  job.priority = kind.priorities[random.Pick(kind.priorities)].first;
  return job;
}

// Mean GPU-seconds of a job, by Monte Carlo on a stream of its own.
double MeanGpuSeconds(const SyntheticOptions& options,
                      const std::vector<Kind>& kinds) {
  constexpr int kDraws = 20000;
  SimRandom random(options.seed ^ 0x9e3779b97f4a7c15ULL);
  const auto shares = KindShares(kinds);
  double total = 0;
  for (int i = 0; i < kDraws; ++i) {
    const Kind& kind = kinds[random.Pick(shares)];
    TraceJob job = DrawJob(kind, options.max_gang_gpus, random);
    total += job.gpus * absl::ToDoubleSeconds(job.duration);
  }
  return total / kDraws;
}

// Arrival-rate multiplier of working-day kinds: mean 1 over a day, peak 1.6
// at 15:00 UTC, trough 0.4 at 03:00.
double WorkingDay(absl::Time time) {
  const double day_seconds =
      std::fmod(absl::ToDoubleSeconds(time - absl::UnixEpoch()), kDay);
  return 1.0 + 0.6 * std::sin(2 * std::numbers::pi *
                              (day_seconds / kDay - 9.0 / 24.0));
}

}  // namespace

std::vector<TraceJob> GenerateSynthetic(const SyntheticOptions& options) {
  constexpr double kPeak = 1.6;
  const std::vector<Kind> kinds = KindsOf(options);
  const double rate = options.load * static_cast<double>(options.fleet_gpus) /
                      MeanGpuSeconds(options, kinds);  // jobs per second
  const absl::Time end = options.start + absl::Seconds(options.days * kDay);
  SimRandom random(options.seed);
  const auto shares = KindShares(kinds);
  std::vector<TraceJob> jobs;
  // Thinning: candidates come at the peak rate; each kind keeps a candidate
  // with probability multiplier(t) / peak.
  absl::Time t = options.start;
  while (true) {
    t += absl::Seconds(std::round(random.Exponential(1.0 / (rate * kPeak))));
    if (t >= end) break;
    const Kind& kind = kinds[random.Pick(shares)];
    const double keep = (kind.working_day ? WorkingDay(t) : 1.0) / kPeak;
    if (random.Uniform() >= keep) continue;
    TraceJob job = DrawJob(kind, options.max_gang_gpus, random);
    job.submit_time = t;
    jobs.push_back(std::move(job));
  }
  if (options.elastic_fraction > 0) {
    MakeElastic(jobs, options.elastic_fraction, options.seed);
  }
  return jobs;
}

}  // namespace phalanx::bench
