#include "bench/sim_policies.h"

#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::bench {
namespace {

using ::testing::HasSubstr;

TEST(PolicyConfigTest, EveryKnownPolicyIsAConfigOrNamesWhatCoreLacks) {
  core::Config base;
  base.topology_levels = {"block", "rack"};
  for (const std::string& name : PolicyNames()) {
    const PolicyChoice choice = PolicyConfig(name, base);
    if (choice.config) {
      EXPECT_EQ(choice.config->topology_levels, base.topology_levels) << name;
      EXPECT_TRUE(choice.unavailable_reason.empty()) << name;
    } else {
      EXPECT_THAT(choice.unavailable_reason, HasSubstr("core::Config has no"))
          << name;
    }
  }
}

TEST(PolicyConfigTest, FifoIsStrictSubmitOrderFirstFit) {
  const PolicyChoice fifo = PolicyConfig("fifo", {});
  ASSERT_TRUE(fifo.config.has_value()) << fifo.unavailable_reason;
  EXPECT_TRUE(fifo.config->admission.strict_fifo);
  EXPECT_EQ(fifo.config->admission.ordering, core::Ordering::kSubmitOrder);
  EXPECT_TRUE(fifo.config->placement.first_fit);
  EXPECT_EQ(fifo.config->reservation.depth, 0);
  EXPECT_FALSE(fifo.config->preemption.enabled);
}

TEST(PolicyConfigTest, KueueLikeIsBestEffortBestFit) {
  const PolicyChoice kueue = PolicyConfig("kueue-like", {});
  ASSERT_TRUE(kueue.config.has_value()) << kueue.unavailable_reason;
  EXPECT_FALSE(kueue.config->admission.strict_fifo);
  EXPECT_EQ(kueue.config->admission.ordering,
            core::Ordering::kPriorityFairShareAge);
  EXPECT_FALSE(kueue.config->placement.first_fit);
  EXPECT_EQ(kueue.config->reservation.depth, 0);
  EXPECT_FALSE(kueue.config->preemption.enabled);
}

TEST(PolicyConfigTest, SlurmLikeIsPriorityAgeWithOneReservationForAnyHead) {
  const PolicyChoice slurm = PolicyConfig("slurm-like", {});
  ASSERT_TRUE(slurm.config.has_value()) << slurm.unavailable_reason;
  EXPECT_FALSE(slurm.config->fair_share.enabled);
  EXPECT_EQ(slurm.config->reservation.depth, 1);
  EXPECT_EQ(slurm.config->reservation.min_priority,
            std::numeric_limits<int>::lowest());
  EXPECT_FALSE(slurm.config->preemption.enabled);
  EXPECT_FALSE(slurm.config->admission.strict_fifo);
}

TEST(PolicyConfigTest, PhalanxPreemptsAndReserves) {
  const PolicyChoice phalanx = PolicyConfig("phalanx", {});
  ASSERT_TRUE(phalanx.config.has_value()) << phalanx.unavailable_reason;
  EXPECT_TRUE(phalanx.config->preemption.enabled);
  EXPECT_GE(phalanx.config->reservation.depth, 1);
  EXPECT_TRUE(phalanx.config->fair_share.enabled);
  EXPECT_FALSE(phalanx.config->admission.strict_fifo);
}

TEST(PolicyConfigTest, UnknownNameIsUnavailable) {
  EXPECT_THAT(PolicyConfig("lottery", {}).unavailable_reason,
              HasSubstr("unknown policy"));
}

}  // namespace
}  // namespace phalanx::bench
