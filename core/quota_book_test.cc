#include "core/quota_book.h"

#include "core/fleet.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using testing::MakeQueue;

// A gang of `queue` holding `gpus` GPUs on each of the fleet's first nodes.
Gang Holding(const Fleet& fleet, const std::string& queue, int nodes,
             int gpus) {
  Gang gang;
  gang.id = GangId("g-" + queue);
  gang.spec.queue = QueueName(queue);
  for (int i = 0; i < nodes; ++i) {
    PodPlacement pod{"set-0", i, fleet.slots()[i].node.spec.id, {}};
    for (int g = 0; g < gpus; ++g) pod.gpu_indices.push_back(g);
    gang.placement.push_back(pod);
  }
  return gang;
}

class QuotaBookTest : public ::testing::Test {
 protected:
  QuotaBookTest() : book_(FairShareConfig{}) {
    fleet_.Upsert(testing::MakeNodes(1, 1, 4));
    book_.PutQueue(MakeQueue("cohort"));
    book_.PutQueue(MakeQueue("a", 16, "cohort"));
    book_.PutQueue(MakeQueue("b", 16, "cohort"));
  }
  Fleet fleet_{{"block", "rack"}};
  QuotaBook book_;
};

TEST_F(QuotaBookTest, ChargeCountsHeldGpusByModelAndUndoes) {
  const Gang gang = Holding(fleet_, "a", 2, 8);
  book_.Charge(gang, fleet_, +1);
  EXPECT_EQ(book_.Held(QueueName("a")).at("H100"), 16);
  book_.Charge(gang, fleet_, -1);
  EXPECT_EQ(book_.Held(QueueName("a")).at("H100"), 0);
  EXPECT_THAT(book_.Held(QueueName("nobody")), IsEmpty());
}

TEST_F(QuotaBookTest, WithinNominalNeedsNoReason) {
  const Queue& a = *book_.FindQueue(QueueName("a"));
  EXPECT_EQ(book_.QuotaReason(a, "H100", 16), "");
}

TEST_F(QuotaBookTest, BorrowingIsBoundedByWhatSiblingsCanLend) {
  const Queue& a = *book_.FindQueue(QueueName("a"));
  EXPECT_EQ(book_.QuotaReason(a, "H100", 32), "");  // b lends its 16
  EXPECT_THAT(book_.QuotaReason(a, "H100", 33),
              HasSubstr("QUOTA: queue a would hold 17 H100 GPUs above its "
                        "nominal 16; cohort cohort lends 16"));
  book_.Charge(Holding(fleet_, "b", 1, 8), fleet_, +1);
  EXPECT_THAT(book_.QuotaReason(a, "H100", 32), HasSubstr("lends 8"));
}

TEST_F(QuotaBookTest, AQueueWithoutCohortCannotBorrow) {
  Queue lone = MakeQueue("lone", 8);
  book_.PutQueue(lone);
  EXPECT_THAT(book_.QuotaReason(lone, "H100", 9),
              HasSubstr("it has no cohort to borrow from"));
}

TEST_F(QuotaBookTest, BorrowedAndReclaimable) {
  book_.Charge(Holding(fleet_, "b", 3, 8), fleet_, +1);  // 24 of nominal 16
  EXPECT_EQ(book_.BorrowedGpus(QueueName("b")), 8);
  EXPECT_EQ(book_.BorrowedGpus(QueueName("a")), 0);
  const Queue& a = *book_.FindQueue(QueueName("a"));
  EXPECT_THAT(book_.ReclaimableFrom(a, 8), ElementsAre(QueueName("b")));
  // Above its own nominal after admission, a reclaims nothing.
  EXPECT_THAT(book_.ReclaimableFrom(a, 17), IsEmpty());
}

TEST_F(QuotaBookTest, ScoresAreEqualWithFairSharingOff) {
  book_.Charge(Holding(fleet_, "b", 3, 8), fleet_, +1);
  FairShareConfig off;
  off.enabled = false;
  book_.SetFairShare(off);
  EXPECT_EQ(book_.Score(QueueName("a")), book_.Score(QueueName("b")));
  FairShareConfig on;
  book_.SetFairShare(on);
  EXPECT_LT(book_.Score(QueueName("a")), book_.Score(QueueName("b")));
}

// b holds 24 GPUs now and accrued usage for half a life while holding 8;
// a holds and held nothing. With the held GPUs b scores 4 + 24, without
// them 4 (its decayed usage alone), and a scores 0 either way.
TEST_F(QuotaBookTest, DecayedUsageOnlyLeavesTheHeldGpusOut) {
  const absl::Time t0 = testing::kT0;
  FairShareConfig config;
  config.half_life = absl::Hours(1);
  book_.SetFairShare(config);
  book_.Accrue(QueueName("b"), t0);
  book_.Charge(Holding(fleet_, "b", 1, 8), fleet_, +1);
  book_.Accrue(QueueName("b"), t0 + absl::Hours(1));
  book_.Charge(Holding(fleet_, "b", 2, 8), fleet_, +1);
  EXPECT_DOUBLE_EQ(book_.Score(QueueName("b")).value, 4 + 24);
  config.decayed_usage_only = true;
  book_.SetFairShare(config);
  EXPECT_DOUBLE_EQ(book_.Score(QueueName("b")).value, 4);
  EXPECT_DOUBLE_EQ(book_.Score(QueueName("a")).value, 0);
}

TEST_F(QuotaBookTest, EraseQueueForgetsItsLedgerEntry) {
  const absl::Time t0 = testing::kT0;
  book_.Charge(Holding(fleet_, "b", 1, 8), fleet_, +1);
  book_.Accrue(QueueName("b"), t0);
  book_.Accrue(QueueName("b"), t0 + absl::Hours(1));
  EXPECT_TRUE(book_.ledger().entries().contains(QueueName("b")));
  book_.EraseQueue(QueueName("b"));
  EXPECT_EQ(book_.FindQueue(QueueName("b")), nullptr);
  EXPECT_FALSE(book_.ledger().entries().contains(QueueName("b")));
}

}  // namespace
}  // namespace phalanx::core
