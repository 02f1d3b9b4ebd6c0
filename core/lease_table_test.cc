#include "core/lease_table.h"

#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::kT0;

TEST(LeaseTableTest, LapsesAtExpiryInTimeThenIdOrder) {
  LeaseTable table;
  table.Set(GangId("g-000003"), kT0 + absl::Seconds(10));
  table.Set(GangId("g-000002"), kT0 + absl::Seconds(10));
  table.Set(GangId("g-000001"), kT0 + absl::Seconds(20));
  EXPECT_EQ(table.NextLapse(), kT0 + absl::Seconds(10));
  EXPECT_THAT(table.TakeLapsed(kT0 + absl::Seconds(9)), IsEmpty());
  EXPECT_THAT(table.TakeLapsed(kT0 + absl::Seconds(10)),
              ElementsAre(GangId("g-000002"), GangId("g-000003")));
  EXPECT_EQ(table.size(), 1u);
  EXPECT_THAT(table.TakeLapsed(kT0 + absl::Seconds(30)),
              ElementsAre(GangId("g-000001")));
  EXPECT_EQ(table.NextLapse(), absl::InfiniteFuture());
}

TEST(LeaseTableTest, SetMovesARenewedLease) {
  LeaseTable table;
  table.Set(GangId("g-1"), kT0 + absl::Seconds(10));
  table.Set(GangId("g-1"), kT0 + absl::Seconds(40));
  EXPECT_EQ(table.ExpiryOf(GangId("g-1")), kT0 + absl::Seconds(40));
  EXPECT_THAT(table.TakeLapsed(kT0 + absl::Seconds(39)), IsEmpty());
  EXPECT_THAT(table.TakeLapsed(kT0 + absl::Seconds(40)),
              ElementsAre(GangId("g-1")));
  EXPECT_EQ(table.ExpiryOf(GangId("g-1")), std::nullopt);
}

TEST(LeaseTableTest, EraseForgetsTheLease) {
  LeaseTable table;
  table.Set(GangId("g-1"), kT0);
  table.Erase(GangId("g-1"));
  table.Erase(GangId("g-2"));  // none: a no-op
  EXPECT_THAT(table.TakeLapsed(kT0 + absl::Hours(1)), IsEmpty());
  EXPECT_EQ(table.size(), 0u);
}

TEST(LeaseTableTest, NothingLapsesBeforeNotBefore) {
  LeaseTable table;
  table.Set(GangId("g-1"), kT0);
  table.set_not_before(kT0 + absl::Minutes(5));
  EXPECT_EQ(table.NextLapse(), kT0 + absl::Minutes(5));
  EXPECT_THAT(table.TakeLapsed(kT0 + absl::Minutes(4)), IsEmpty());
  EXPECT_THAT(table.TakeLapsed(kT0 + absl::Minutes(5)),
              ElementsAre(GangId("g-1")));
}

}  // namespace
}  // namespace phalanx::core
