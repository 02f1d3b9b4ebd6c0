#include "bench/perf/stats.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace phalanx::perf {
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

TEST(JsonObjectTest, KeepsOrderAndNests) {
  JsonObject inner;
  inner.Add("clients", 64).Add("quick", true);
  JsonObject outer;
  outer.Add("meta", inner).Add("rate", 1500.5).Add("name", "a\"b");
  EXPECT_EQ(outer.Dump(),
            R"({"meta": {"clients": 64, "quick": true}, "rate": 1500.5, )"
            R"("name": "a\"b"})");
}

TEST(JsonObjectTest, NonFiniteIsNull) {
  JsonObject object;
  object.Add("x", std::numeric_limits<double>::infinity())
      .Add("y", std::nan(""));
  EXPECT_EQ(object.Dump(), R"({"x": null, "y": null})");
}

TEST(JsonQuoteTest, EscapesControlCharacters) {
  EXPECT_EQ(JsonQuote("a\nb\x01"), R"("a\nb\u0001")");
}

}  // namespace
}  // namespace phalanx::perf
