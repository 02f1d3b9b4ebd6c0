#include "core/deadlines.h"

#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

using testing::kT0;

TEST(DeadlinesTest, ArmGangSetsMaxRuntimeAndStartTimeout) {
  Deadlines deadlines;
  Gang gang;
  gang.id = GangId("g-1");
  gang.state = GangState::kAdmitted;
  gang.admit_time = kT0;
  gang.spec.max_runtime = absl::Hours(1);
  deadlines.ArmGang(gang, absl::Minutes(5));
  EXPECT_THAT(deadlines.TakeDueGangs(kT0 + absl::Minutes(4)), IsEmpty());
  EXPECT_THAT(deadlines.TakeDueGangs(kT0 + absl::Minutes(5)),
              ElementsAre(GangId("g-1")));
  EXPECT_THAT(deadlines.TakeDueGangs(kT0 + absl::Hours(2)),
              ElementsAre(GangId("g-1")));
  EXPECT_THAT(deadlines.TakeDueGangs(kT0 + absl::Hours(3)), IsEmpty());
}

TEST(DeadlinesTest, ARunningGangHasNoStartTimeoutAndAPendingOneNoTimers) {
  Deadlines deadlines;
  Gang gang;
  gang.id = GangId("g-1");
  gang.state = GangState::kRunning;
  gang.admit_time = kT0;
  deadlines.ArmGang(gang, absl::Minutes(5));
  Gang pending;
  pending.id = GangId("g-2");
  pending.spec.max_runtime = absl::Minutes(1);
  deadlines.ArmGang(pending, absl::Minutes(5));
  EXPECT_THAT(deadlines.TakeDueGangs(kT0 + absl::Hours(1)), IsEmpty());
}

TEST(DeadlinesTest, DrainsComeDueInTimeOrder) {
  Deadlines deadlines;
  deadlines.AddDrain(kT0 + absl::Minutes(2), NodeId("b"));
  deadlines.AddDrain(kT0 + absl::Minutes(1), NodeId("a"));
  const auto due = deadlines.TakeDueDrains(kT0 + absl::Minutes(2));
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].second, NodeId("a"));
  EXPECT_EQ(due[1].second, NodeId("b"));
  EXPECT_THAT(deadlines.TakeDueDrains(kT0 + absl::Hours(1)), IsEmpty());
}

TEST(DeadlinesTest, SilentForCountsFromTheLastHeartbeat) {
  Deadlines deadlines;
  deadlines.Heard(NodeId("a"), kT0);
  EXPECT_EQ(deadlines.SilentFor(NodeId("a"), kT0 + absl::Seconds(30),
                                absl::Seconds(30)),
            std::nullopt);
  EXPECT_EQ(deadlines.SilentFor(NodeId("a"), kT0 + absl::Seconds(31),
                                absl::Seconds(30)),
            absl::Seconds(31));
  // A node never heard from counts as heard now.
  EXPECT_EQ(deadlines.SilentFor(NodeId("b"), kT0, absl::Seconds(30)),
            std::nullopt);
  EXPECT_EQ(deadlines.LastHeard(NodeId("b")), kT0);
  deadlines.HeardIfNew(NodeId("b"), kT0 + absl::Hours(1));  // not new
  EXPECT_EQ(deadlines.LastHeard(NodeId("b")), kT0);
  deadlines.Forget(NodeId("b"));
  EXPECT_EQ(deadlines.LastHeard(NodeId("b")), std::nullopt);
}

TEST(DeadlinesTest, TheStartUpGraceCountsFromTheFirstStart) {
  Deadlines deadlines;
  EXPECT_FALSE(deadlines.InStartupGrace(kT0, absl::Minutes(1)));
  deadlines.Started(kT0);
  deadlines.Started(kT0 + absl::Minutes(10));  // the first call wins
  EXPECT_TRUE(
      deadlines.InStartupGrace(kT0 + absl::Seconds(59), absl::Minutes(1)));
  EXPECT_FALSE(
      deadlines.InStartupGrace(kT0 + absl::Minutes(1), absl::Minutes(1)));
}

}  // namespace
}  // namespace phalanx::core
