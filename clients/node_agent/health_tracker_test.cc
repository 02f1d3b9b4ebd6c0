#include "clients/node_agent/health_tracker.h"

#include "gtest/gtest.h"

namespace phalanx::node_agent {
namespace {

CheckResult Pass() {
  CheckResult result;
  result.node_passed = true;
  return result;
}

CheckResult Fail(const std::string& detail) {
  CheckResult result;
  result.node_detail = detail;
  return result;
}

CheckResult BadGpu(int index, const std::string& reason) {
  CheckResult result = Pass();
  result.bad_gpus[index] = reason;
  return result;
}

TEST(HealthTrackerTest, AFailureAtOnceAndHealthAfterThePassesInARow) {
  HealthTracker tracker(3);
  EXPECT_EQ(tracker.Observe(Pass()),
            (HealthReport{true, {}, "health check passed"}));
  const HealthReport failed{false, {}, "health command exited 1"};
  EXPECT_EQ(tracker.Observe(Fail("health command exited 1")), failed);
  EXPECT_EQ(tracker.Observe(Pass()), failed);
  EXPECT_EQ(tracker.Observe(Pass()), failed);
  EXPECT_EQ(tracker.Observe(Pass()),
            (HealthReport{true, {}, "health check passed"}));
}

TEST(HealthTrackerTest, AFailureAmongPassesStartsTheCountOver) {
  HealthTracker tracker(2);
  tracker.Observe(Fail("first"));
  tracker.Observe(Pass());
  // A new failure keeps the first reason, so the report does not change.
  EXPECT_EQ(tracker.Observe(Fail("second")),
            (HealthReport{false, {}, "first"}));
  EXPECT_FALSE(tracker.Observe(Pass()).healthy);
  EXPECT_TRUE(tracker.Observe(Pass()).healthy);
}

TEST(HealthTrackerTest, EachGpuRecoversOnItsOwn) {
  HealthTracker tracker(2);
  EXPECT_EQ(tracker.Observe(BadGpu(3, "XID 79")),
            (HealthReport{true, {3}, "GPU 3: XID 79"}));
  CheckResult both = BadGpu(5, "");
  both.bad_gpus[3] = "XID 79";
  EXPECT_EQ(tracker.Observe(both),
            (HealthReport{true, {3, 5}, "GPU 3: XID 79; GPU 5"}));
  EXPECT_EQ(tracker.Observe(BadGpu(5, "")).unhealthy_gpus,
            (std::vector<int>{3, 5}));
  // GPU 3 passed twice in a row; GPU 5 failed again just now.
  EXPECT_EQ(tracker.Observe(BadGpu(5, "")).unhealthy_gpus,
            (std::vector<int>{5}));
  tracker.Observe(Pass());
  EXPECT_EQ(tracker.Observe(Pass()),
            (HealthReport{true, {}, "health check passed"}));
}

TEST(HealthTrackerTest, TheReasonIsBounded) {
  HealthTracker tracker(1);
  EXPECT_EQ(tracker.Observe(Fail(std::string(5000, 'x'))).reason.size(),
            kMaxReasonBytes);
}

}  // namespace
}  // namespace phalanx::node_agent
