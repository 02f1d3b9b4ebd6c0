#include "core/preemption_book.h"

#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

using testing::kT0;

TEST(PreemptionBookTest, VictimsNameTheirPreemptorUntilForgotten) {
  PreemptionBook book;
  book.AddVictim(GangId("g-1"), GangId("g-9"), kT0);
  book.AddVictim(GangId("g-2"), GangId(), kT0);  // restored: unknown
  EXPECT_EQ(book.VictimOf(GangId("g-1"))->deadline, kT0);
  EXPECT_EQ(book.RequeuedReason(GangId("g-1")), "REQUEUED: preempted by g-9");
  EXPECT_EQ(book.RequeuedReason(GangId("g-2")), "REQUEUED: preempted");
  book.ForgetVictim(GangId("g-1"));
  EXPECT_EQ(book.VictimOf(GangId("g-1")), nullptr);
}

TEST(PreemptionBookTest, HeldNodesBarOtherGangsOnly) {
  Fleet fleet({"block", "rack"});
  fleet.Upsert(testing::MakeNodes(1, 1, 3));
  PreemptionBook book;
  EXPECT_FALSE(book.HeldForOther(0, GangId("g-1"), fleet));
  book.Hold(GangId("g-9"), fleet.slots()[1].node.spec.id);
  EXPECT_TRUE(book.HoldsFor(GangId("g-9")));
  EXPECT_TRUE(book.HeldForOther(1, GangId("g-1"), fleet));
  EXPECT_FALSE(book.HeldForOther(1, GangId("g-9"), fleet));
  EXPECT_FALSE(book.HeldForOther(0, GangId("g-1"), fleet));
  EXPECT_THAT(book.HeldSlots(fleet), ElementsAre(1));
  EXPECT_TRUE(book.DropHolds(GangId("g-9")));
  EXPECT_FALSE(book.DropHolds(GangId("g-9")));
  EXPECT_FALSE(book.HeldForOther(1, GangId("g-1"), fleet));
}

TEST(PreemptionBookTest, APreemptorIsReadyOnceNoVictimStillStops) {
  PreemptionBook book;
  book.Hold(GangId("g-8"), NodeId("a"));
  book.Hold(GangId("g-9"), NodeId("b"));
  book.AddVictim(GangId("g-1"), GangId("g-9"), kT0);
  EXPECT_THAT(book.ReadyPreemptors(), ElementsAre(GangId("g-8")));
  book.ForgetVictim(GangId("g-1"));
  EXPECT_THAT(book.ReadyPreemptors(),
              UnorderedElementsAre(GangId("g-8"), GangId("g-9")));
}

TEST(PreemptionBookTest, TheEarliestWakeUpComesOnce) {
  PreemptionBook book;
  EXPECT_FALSE(book.TakeWakeup(kT0));
  book.WakeAt(kT0 + absl::Minutes(5));
  book.WakeAt(kT0 + absl::Minutes(2));
  EXPECT_FALSE(book.TakeWakeup(kT0 + absl::Minutes(1)));
  EXPECT_TRUE(book.TakeWakeup(kT0 + absl::Minutes(2)));
  EXPECT_FALSE(book.TakeWakeup(kT0 + absl::Hours(1)));
  EXPECT_THAT(book.held_for(), IsEmpty());
}

}  // namespace
}  // namespace phalanx::core
