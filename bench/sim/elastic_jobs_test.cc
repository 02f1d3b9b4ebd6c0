#include "bench/sim/elastic_jobs.h"

#include "gtest/gtest.h"

namespace phalanx::bench {
namespace {

std::vector<TraceJob> JobsOf(const std::vector<int>& gpus) {
  std::vector<TraceJob> jobs;
  for (int g : gpus) {
    TraceJob job;
    job.gpus = g;
    jobs.push_back(job);
  }
  return jobs;
}

std::vector<bool> Marks(const std::vector<TraceJob>& jobs) {
  std::vector<bool> marks;
  for (const TraceJob& job : jobs) marks.push_back(job.elastic);
  return marks;
}

TEST(ElasticMinimumTest, HalfRoundedUpToWholeSlices) {
  EXPECT_EQ(ElasticMinimum(8, 0), 4);
  EXPECT_EQ(ElasticMinimum(9, 0), 5);
  EXPECT_EQ(ElasticMinimum(1, 0), 1);    // cannot shrink
  EXPECT_EQ(ElasticMinimum(16, 8), 8);   // one slice of two
  EXPECT_EQ(ElasticMinimum(24, 8), 16);  // 12 → two slices
  EXPECT_EQ(ElasticMinimum(8, 8), 8);    // one slice: cannot shrink
}

TEST(SetElasticMinimumTest, TheLargestPodSetBecomesElastic) {
  core::GangSpec spec;
  spec.pod_sets.resize(2);
  spec.pod_sets[0].count = 1;
  spec.pod_sets[1].count = 16;
  spec.pod_sets[1].slice.size = 8;
  SetElasticMinimum(spec);
  EXPECT_EQ(spec.pod_sets[0].min_count, 0);
  EXPECT_EQ(spec.pod_sets[1].min_count, 8);
  core::GangSpec one;
  one.pod_sets.resize(1);
  one.pod_sets[0].count = 1;
  SetElasticMinimum(one);
  EXPECT_EQ(one.pod_sets[0].min_count, 0);  // a single pod stays fixed
}

TEST(MakeElasticTest, OnlyLargeGangsSeededAndNested) {
  std::vector<int> gpus;
  for (int i = 0; i < 400; ++i) gpus.push_back(i % 2 == 0 ? 8 : 64 << (i % 3));
  std::vector<TraceJob> half = JobsOf(gpus);
  MakeElastic(half, 0.5, 7);
  int marked = 0;
  for (const TraceJob& job : half) {
    if (!job.elastic) continue;
    ++marked;
    EXPECT_GE(job.gpus, 64);
  }
  EXPECT_EQ(marked, 100);  // half of the 200 large ones

  std::vector<TraceJob> again = JobsOf(gpus);
  MakeElastic(again, 0.5, 7);
  EXPECT_EQ(Marks(again), Marks(half));
  std::vector<TraceJob> other = JobsOf(gpus);
  MakeElastic(other, 0.5, 8);
  EXPECT_NE(Marks(other), Marks(half));

  // A larger share marks a superset; 0 clears every mark.
  std::vector<TraceJob> more = half;
  MakeElastic(more, 0.75, 7);
  for (size_t i = 0; i < gpus.size(); ++i) {
    EXPECT_TRUE(!half[i].elastic || more[i].elastic) << i;
  }
  MakeElastic(more, 0, 7);
  for (const TraceJob& job : more) EXPECT_FALSE(job.elastic);
}

}  // namespace
}  // namespace phalanx::bench
