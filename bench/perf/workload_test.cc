#include "bench/perf/workload.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace phalanx::perf {
namespace {

TEST(WorkloadTest, FleetHasUniqueIdsAndRackLabels) {
  const auto nodes = MakeFleet(10'000);
  std::set<std::string> ids;
  for (const core::Node& node : nodes) ids.insert(node.spec.id.value());
  EXPECT_EQ(ids.size(), 10'000u);
  EXPECT_EQ(nodes[0].spec.labels.at("rack"), "b0-r0");
  EXPECT_EQ(nodes[10'000 - 1].spec.labels.at("block"), "b49");
  EXPECT_EQ(nodes[10'000 - 1].spec.labels.at("rack"), "b49-r9");
}

TEST(WorkloadTest, MixIsDeterministicPerSeed) {
  GangMix a(3), b(3), c(4);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const core::GangSpec x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs |= !(x == c.Next());
  }
  EXPECT_TRUE(differs);
}

TEST(WorkloadTest, SchedulerAcceptsEveryGangOfTheMix) {
  auto scheduler = MakeScheduler(1'000, 500, /*seed=*/1);
  EXPECT_EQ(scheduler->gangs().size(), 500u);
  scheduler->RunCycle(BenchStart() + absl::Seconds(1));
  int admitted = 0;
  for (const core::Event& event : scheduler->TakeMutation().events) {
    admitted += event.type == core::EventType::kAdmitted ? 1 : 0;
  }
  EXPECT_GT(admitted, 0);
}

}  // namespace
}  // namespace phalanx::perf
