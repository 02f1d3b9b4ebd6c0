#include "core/fit_cache.h"

#include "core/gang_table.h"
#include "core/plan.h"
#include "core/preemption_book.h"
#include "core/reservation_book.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using testing::kT0;

class FitCacheTest : public ::testing::Test {
 protected:
  FitCacheTest() { fleet_.Upsert(testing::MakeNodes(1, 2, 2)); }
  Fleet fleet_{{"block", "rack"}};
  FitCache cache_;
};

TEST_F(FitCacheTest, NeverFitsNamesWhyAndFollowsTheFleetsStructure) {
  const GangSpec fits = testing::Spec("q").Pods(2, 8).Required("rack");
  const GangSpec too_wide = testing::Spec("q").Pods(3, 8).Required("rack");
  EXPECT_EQ(cache_.NeverFitsReason(fits, fleet_), "");
  EXPECT_THAT(cache_.NeverFitsReason(too_wide, fleet_),
              HasSubstr("can never fit"));
  // A third node in the rack: the cached answer is not reused.
  std::vector<Node> more = testing::MakeNodes(1, 1, 3);
  fleet_.Upsert({more[2]});
  EXPECT_EQ(cache_.NeverFitsReason(too_wide, fleet_), "");
}

TEST_F(FitCacheTest, JointSearchFindsPodSetsThatCannotShareTheFleet) {
  // Each pod set fits alone; together they need five nodes of four.
  const GangSpec spec = testing::Spec("q").Pods(3, 8).Pods(2, 8);
  EXPECT_THAT(cache_.NeverFitsReason(spec, fleet_), HasSubstr("can never fit"));
}

TEST_F(FitCacheTest, WhenItFitsNowOnAnIdleFleet) {
  GangTable gangs;
  Gang gang;
  gang.id = GangId("g-1");
  gang.spec = testing::Spec("q").Pods(4, 8);
  const FitCache::NaturalStart start =
      cache_.WhenItFits(gang, fleet_, gangs, kT0);
  EXPECT_TRUE(start.fits_now);
}

TEST_F(FitCacheTest, RestrictedSlotsMergeReservationsAndHoldsSorted) {
  ReservationBook reservations;
  GangTable gangs;
  reservations.KeepOrReplan(ReservationConfig{}, 0, fleet_, gangs, kT0);
  PreemptionBook holds;
  Plan plan;
  EXPECT_THAT(cache_.RestrictedSlots(reservations, holds, plan, fleet_),
              IsEmpty());
  Reservation r;
  r.gang = GangId("g-1");
  r.nodes = {fleet_.slots()[3].node.spec.id, fleet_.slots()[1].node.spec.id};
  reservations.Add(r, fleet_);
  holds.Hold(GangId("g-2"), fleet_.slots()[1].node.spec.id);
  // Cached until forgotten.
  EXPECT_THAT(cache_.RestrictedSlots(reservations, holds, plan, fleet_),
              IsEmpty());
  cache_.ForgetRestricted();
  EXPECT_THAT(cache_.RestrictedSlots(reservations, holds, plan, fleet_),
              ElementsAre(1, 3));
}

}  // namespace
}  // namespace phalanx::core
