#include "bench/stats.h"

#include <vector>

#include "gtest/gtest.h"

namespace phalanx::bench {
namespace {

TEST(PercentileTest, EmptyIsZero) {
  std::vector<double> none;
  EXPECT_EQ(Percentile(none, 99), 0);
}

TEST(PercentileTest, InterpolatesBetweenClosestRanks) {
  std::vector<double> samples = {40, 10, 30, 20};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(Percentile(samples, 0), 10);
  EXPECT_DOUBLE_EQ(Percentile(samples, 50), 25);
  EXPECT_DOUBLE_EQ(Percentile(samples, 100), 40);
  EXPECT_DOUBLE_EQ(Percentile(samples, 99), 39.7);
}

TEST(PercentileTest, OneSampleIsEveryPercentile) {
  std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(Percentile(one, 1), 7);
  EXPECT_DOUBLE_EQ(Percentile(one, 99), 7);
}

TEST(PercentileTest, InterpolatesLinearlyBetweenClosestRanksOfSorted) {
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(PercentileOfSorted(v, 0), 1);
  EXPECT_DOUBLE_EQ(PercentileOfSorted(v, 50), 2.5);   // rank 1.5
  EXPECT_DOUBLE_EQ(PercentileOfSorted(v, 95), 3.85);  // rank 2.85
  EXPECT_DOUBLE_EQ(PercentileOfSorted(v, 99), 3.97);  // rank 2.97
  EXPECT_DOUBLE_EQ(PercentileOfSorted(v, 100), 4);
  EXPECT_DOUBLE_EQ(PercentileOfSorted({7}, 95), 7);
}

TEST(PercentileTest, ClampsPercentsOutsideZeroToHundred) {
  const std::vector<double> v = {1, 2, 3};
  EXPECT_DOUBLE_EQ(PercentileOfSorted(v, -5), 1);
  EXPECT_DOUBLE_EQ(PercentileOfSorted(v, 150), 3);
}

}  // namespace
}  // namespace phalanx::bench
