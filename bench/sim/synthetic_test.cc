#include "bench/sim/synthetic.h"

#include <set>

#include "gtest/gtest.h"

namespace phalanx::bench {
namespace {

bool SameJobs(const std::vector<TraceJob>& a, const std::vector<TraceJob>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].submit_time != b[i].submit_time ||
        a[i].duration != b[i].duration || a[i].gpus != b[i].gpus ||
        a[i].team != b[i].team || a[i].priority != b[i].priority) {
      return false;
    }
  }
  return true;
}

TEST(SyntheticTest, SameSeedSameJobsOtherSeedOtherJobs) {
  SyntheticOptions options;
  options.days = 3;
  const auto a = GenerateSynthetic(options);
  EXPECT_TRUE(SameJobs(a, GenerateSynthetic(options)));
  options.seed = 2;
  EXPECT_FALSE(SameJobs(a, GenerateSynthetic(options)));
}

TEST(SyntheticTest, LooksLikeAnLlmLab) {
  SyntheticOptions options;
  options.days = 28;
  const auto jobs = GenerateSynthetic(options);
  ASSERT_GT(jobs.size(), 1000u);
  std::set<std::string> teams;
  int high_priority = 0;
  int max_gpus = 0;
  int min_gpus = 1 << 20;
  double gpu_seconds = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const TraceJob& job = jobs[i];
    teams.insert(job.team);
    if (job.priority > 0) ++high_priority;
    max_gpus = std::max(max_gpus, job.gpus);
    min_gpus = std::min(min_gpus, job.gpus);
    gpu_seconds += job.gpus * absl::ToDoubleSeconds(job.duration);
    EXPECT_GE(job.submit_time, options.start);
    EXPECT_LT(job.submit_time, options.start + absl::Hours(24 * 28));
    if (i > 0) {
      EXPECT_GE(job.submit_time, jobs[i - 1].submit_time);
    }
  }
  EXPECT_EQ(teams.size(), 5u);
  EXPECT_GT(high_priority, 0);
  EXPECT_EQ(min_gpus, 1);
  EXPECT_EQ(max_gpus, 1024);
  // Mean demand near load × fleet (a few huge jobs make it noisy).
  const double demand = gpu_seconds / (28 * 86400.0);
  EXPECT_GT(demand, 0.5 * 0.95 * 2048);
  EXPECT_LT(demand, 1.5 * 0.95 * 2048);
}

TEST(SyntheticTest, ClampsGangsToTheLargestAllowed) {
  SyntheticOptions options;
  options.days = 28;
  options.max_gang_gpus = 384;
  for (const TraceJob& job : GenerateSynthetic(options)) {
    EXPECT_LE(job.gpus, 384);
  }
}

// GPU-seconds of jobs of at least `gpus` GPUs ÷ all GPU-seconds.
double ShareOfDemandAtLeast(const std::vector<TraceJob>& jobs, int gpus) {
  double big = 0;
  double all = 0;
  for (const TraceJob& job : jobs) {
    const double work = job.gpus * absl::ToDoubleSeconds(job.duration);
    all += work;
    if (job.gpus >= gpus) big += work;
  }
  return all > 0 ? big / all : 0;
}

TEST(SyntheticTest, HalfFleetProfileMakesHalfFleetGangsCarryTheLoad) {
  SyntheticOptions options;
  options.days = 28;
  const auto lab = GenerateSynthetic(options);  // 2,048 GPUs
  options.profile = SyntheticProfile::kHalfFleet;
  const auto half = GenerateSynthetic(options);
  int max_gpus = 0;
  double gpu_seconds = 0;
  for (const TraceJob& job : half) {
    max_gpus = std::max(max_gpus, job.gpus);
    gpu_seconds += job.gpus * absl::ToDoubleSeconds(job.duration);
  }
  EXPECT_EQ(max_gpus, 1024);  // half of the fleet
  const double demand = gpu_seconds / (28 * 86400.0);
  EXPECT_GT(demand, 0.5 * 0.95 * 2048);
  EXPECT_LT(demand, 1.5 * 0.95 * 2048);
  EXPECT_GT(ShareOfDemandAtLeast(half, 1024),
            ShareOfDemandAtLeast(lab, 1024) + 0.2);
  options.fleet_gpus = 512;  // the sizes follow the fleet
  options.max_gang_gpus = 512;
  for (const TraceJob& job : GenerateSynthetic(options)) {
    EXPECT_LE(job.gpus, 256);
  }
}

TEST(SyntheticTest, ElasticFractionMarksOnlyLargeGangsAndChangesNoDraw) {
  SyntheticOptions options;
  options.days = 14;
  const auto fixed = GenerateSynthetic(options);
  options.elastic_fraction = 0.5;
  const auto elastic = GenerateSynthetic(options);
  EXPECT_TRUE(SameJobs(fixed, elastic));  // same arrivals, sizes, durations
  int large = 0;
  int marked = 0;
  for (const TraceJob& job : elastic) {
    if (job.gpus >= 64) ++large;
    if (!job.elastic) continue;
    ++marked;
    EXPECT_GE(job.gpus, 64);
  }
  ASSERT_GT(large, 10);
  EXPECT_EQ(marked, (large + 1) / 2);  // round(0.5 × large)
  for (const TraceJob& job : fixed) EXPECT_FALSE(job.elastic);
  // Deterministic from the seed.
  const auto again = GenerateSynthetic(options);
  for (size_t i = 0; i < elastic.size(); ++i) {
    EXPECT_EQ(again[i].elastic, elastic[i].elastic) << i;
  }
}

}  // namespace
}  // namespace phalanx::bench
