#include "core/fair_share.h"

#include <cmath>

#include "core/testing.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using testing::kT0;

TEST(FairShareLedgerTest, UsageDecaysTowardWhatIsHeldByHalfLives) {
  FairShareConfig config;
  config.half_life = absl::Hours(1);
  FairShareLedger ledger(config);
  const QueueName q("q");
  ledger.Accrue(q, {}, kT0);
  ledger.Accrue(q, {{"H100", 64}}, kT0 + absl::Hours(1));  // held 64 for 1 h
  EXPECT_DOUBLE_EQ(ledger.entries().at(q).usage.at("H100"), 32.0);
  ledger.Accrue(q, {}, kT0 + absl::Hours(2));  // held nothing for 1 h
  EXPECT_DOUBLE_EQ(ledger.entries().at(q).usage.at("H100"), 16.0);
}

TEST(FairShareLedgerTest, ScoreCountsHeldGpusAtOnceAndDividesByWeight) {
  FairShareLedger ledger;
  const QueueName q("q");
  EXPECT_DOUBLE_EQ(ledger.Score(q, 2.0, {{"H100", 8}}).value, 4.0);
  EXPECT_DOUBLE_EQ(ledger.Score(q, 1.0, {}).value, 0.0);
}

TEST(FairShareLedgerTest, WeightZeroSortsLastAndIsNeverNan) {
  FairShareLedger ledger;
  const FairShareScore zero = ledger.Score(QueueName("z"), 0.0, {});
  const FairShareScore busy =
      ledger.Score(QueueName("b"), 1.0, {{"H100", 1000}});
  EXPECT_TRUE(busy < zero);
  EXPECT_FALSE(std::isnan(zero.value));
}

}  // namespace
}  // namespace phalanx::core
