#include "core/reservation_book.h"

#include "core/gang_table.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::ElementsAre;

using testing::kT0;

Reservation Holding(const std::string& gang, std::vector<NodeId> nodes,
                    absl::Time start) {
  Reservation r;
  r.gang = GangId(gang);
  r.nodes = std::move(nodes);
  r.start = start;
  return r;
}

class ReservationBookTest : public ::testing::Test {
 protected:
  ReservationBookTest() {
    fleet_.Upsert(testing::MakeNodes(1, 1, 4));
    for (const Fleet::Slot& slot : fleet_.slots()) {
      ids_.push_back(slot.node.spec.id);
    }
    // A first KeepOrReplan sizes the slot index to the fleet.
    config_.depth = 2;
    book_.KeepOrReplan(config_, 0, fleet_, gangs_, kT0);
  }
  Fleet fleet_{{"block", "rack"}};
  std::vector<NodeId> ids_;
  ReservationConfig config_;
  GangTable gangs_;
  ReservationBook book_;
};

TEST_F(ReservationBookTest, AddIndexesTheNodesByTheirFirstHolder) {
  book_.Add(Holding("g-1", {ids_[0], ids_[1]}, kT0 + absl::Hours(1)), fleet_);
  book_.Add(Holding("g-2", {ids_[1], ids_[2]}, kT0 + absl::Hours(2)), fleet_);
  EXPECT_EQ(book_.AtSlot(1)->gang, GangId("g-1"));
  EXPECT_EQ(book_.AtSlot(2)->gang, GangId("g-2"));
  EXPECT_EQ(book_.AtSlot(3), nullptr);
  EXPECT_EQ(book_.Of(GangId("g-2"))->start, kT0 + absl::Hours(2));
  EXPECT_EQ(book_.Of(GangId("g-3")), nullptr);
  EXPECT_THAT(book_.TakenSlots(), ElementsAre(1, 1, 1, 0));
}

TEST_F(ReservationBookTest, MayReserveWithinDepthByPriorityOrAge) {
  config_.min_priority = 5;
  config_.after = absl::Hours(1);
  EXPECT_TRUE(book_.MayReserve(config_, 5, kT0, kT0));
  EXPECT_FALSE(book_.MayReserve(config_, 4, kT0, kT0 + absl::Minutes(59)));
  EXPECT_TRUE(book_.MayReserve(config_, 4, kT0, kT0 + absl::Hours(1)));
  book_.Add(Holding("g-1", {ids_[0]}, kT0), fleet_);
  book_.Add(Holding("g-2", {ids_[1]}, kT0), fleet_);
  EXPECT_FALSE(book_.MayReserve(config_, 9, kT0, kT0));  // depth 2 reached
}

TEST_F(ReservationBookTest, AReplanDropsReservationsOfGangsNoLongerPending) {
  book_.Add(Holding("g-1", {ids_[0]}, kT0), fleet_);
  // g-1 is not in the gang table: a moved epoch drops its reservation.
  EXPECT_TRUE(book_.KeepOrReplan(config_, 1, fleet_, gangs_, kT0));
  EXPECT_TRUE(book_.empty());
  book_.PlannedAt(1);
  // Nothing moved and no full plan due: kept as is, nothing done.
  EXPECT_FALSE(book_.KeepOrReplan(config_, 1, fleet_, gangs_, kT0));
}

TEST_F(ReservationBookTest, ACauseIsTakenOnceAndAbsentOnesAreNone) {
  book_.NoteCause(GangId("g-1"), {ReasonCode::kNoFit, "NO_FIT: x"});
  book_.NoteCause(GangId("g-1"), {ReasonCode::kNoFit, "NO_FIT: y"});  // newer
  const ReservationBook::Cause cause = book_.TakeCause(GangId("g-1"));
  EXPECT_EQ(cause.code, ReasonCode::kNoFit);
  EXPECT_EQ(cause.reason, "NO_FIT: y");
  EXPECT_EQ(book_.TakeCause(GangId("g-1")).code, ReasonCode::kNone);
  EXPECT_EQ(book_.TakeCause(GangId("g-2")).reason, "");
}

TEST(ReservationBookStaticTest, WindowAndBackfillRules) {
  const Reservation r = Holding("g-1", {}, kT0 + absl::Hours(2));
  ReservationConfig config;
  EXPECT_TRUE(ReservationBook::WithinWindow(config, r, kT0));  // no window
  config.window = absl::Hours(1);
  EXPECT_FALSE(ReservationBook::WithinWindow(config, r, kT0));
  EXPECT_TRUE(ReservationBook::WithinWindow(config, r, kT0 + absl::Hours(1)));

  Gang mine;
  mine.id = GangId("g-1");
  EXPECT_TRUE(ReservationBook::MayBackfill(mine, r, kT0));
  Gang other;
  other.id = GangId("g-2");
  EXPECT_FALSE(ReservationBook::MayBackfill(other, r, kT0));  // no estimate
  other.spec.estimated_runtime = absl::Hours(2);
  EXPECT_TRUE(ReservationBook::MayBackfill(other, r, kT0));
  EXPECT_FALSE(ReservationBook::MayBackfill(other, r, kT0 + absl::Seconds(1)));
}

TEST_F(ReservationBookTest, SlotsOfSkipsNodesNoLongerInTheFleet) {
  const Reservation r = Holding("g-1", {ids_[2], NodeId("gone")}, kT0);
  EXPECT_THAT(ReservationBook::SlotsOf(r, fleet_), ElementsAre(2));
}

}  // namespace
}  // namespace phalanx::core
