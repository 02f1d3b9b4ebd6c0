// Bounded backfill with several reservations (Slurm's sched/backfill rule):
// a gang admitted past the head must not delay the expected start of any of
// the first `reservation.depth` reservations. A table test of one fleet and
// a seeded property test over random fleets and gangs.
#include <map>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/scheduler.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using testing::kT0;
using testing::MakeNodes;
using testing::Spec;
using testing::WithEstimate;

std::map<GangId, absl::Time> Starts(const Scheduler& s) {
  std::map<GangId, absl::Time> starts;
  for (const Reservation& r : s.reservations()) starts[r.gang] = r.start;
  return starts;
}

class BackfillTest : public testing::SchedulerFixture {
 protected:
  void Init(int depth, int racks, int nodes_per_rack) {
    Config config;
    config.topology_levels = {"block", "rack"};
    config.reservation.depth = depth;
    config.reservation.min_priority = 1;
    SchedulerFixture::Init(config, MakeNodes(1, racks, nodes_per_rack),
                           {testing::MakeQueue("q")});
  }
};

// Two racks of two 8-GPU nodes. Running: X (1 h) and Y (2 h) fill rack 0,
// Z (3 h) one node of rack 1. P1 and P2 (priority 1) each need a whole
// rack: P1 reserves rack 0 (start in 2 h), P2 with depth 2 rack 1 (3 h),
// holding its free node. Then one 8-GPU gang S of priority 0 arrives.
TEST_F(BackfillTest, TableABackfilledGangNeverDelaysTheFirstDepthReservations) {
  struct Case {
    std::string name;
    int depth;
    absl::Duration estimate;  // of S; 0 = none
    bool admitted;
  } cases[] = {
      {"depth 2: S ends before P2 starts, so it backfills P2's node", 2,
       absl::Minutes(150), true},
      {"depth 2: S would delay P2, so it waits", 2, absl::Minutes(240), false},
      {"depth 2: without an estimate S cannot backfill", 2,
       absl::ZeroDuration(), false},
      {"depth 1: P2 holds nothing; S takes the node and P2 waits longer", 1,
       absl::Minutes(240), true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    now_ = kT0;
    Init(c.depth, 2, 2);
    Submit(WithEstimate(Spec("q").Pods(1, 8), absl::Hours(1)));
    Submit(WithEstimate(Spec("q").Pods(1, 8), absl::Hours(2)));
    Submit(WithEstimate(Spec("q").Pods(1, 8), absl::Hours(3)));
    Cycle();
    GangPtr p1 = Submit(WithEstimate(
        Spec("q").Pods(2, 8).Required("rack").Priority(1), absl::Hours(1)));
    GangPtr p2 = Submit(WithEstimate(
        Spec("q").Pods(2, 8).Required("rack").Priority(1), absl::Hours(1)));
    Cycle();
    const auto before = Starts(*scheduler_);
    ASSERT_EQ(before.size(), static_cast<size_t>(c.depth))
        << Get(p1)->reason << " / " << Get(p2)->reason;
    EXPECT_EQ(before.at(p1->id), kT0 + absl::Seconds(1) + absl::Hours(2));
    if (c.depth == 2) {
      EXPECT_EQ(before.at(p2->id), kT0 + absl::Seconds(1) + absl::Hours(3));
    }
    GangPtr small = Submit(WithEstimate(Spec("q").Pods(1, 8), c.estimate));
    Cycle();
    EXPECT_EQ(Get(small)->state == GangState::kAdmitted, c.admitted);
    // Every reservation of the first `depth` stands, no later than before.
    const auto after = Starts(*scheduler_);
    for (const auto& [gang, start] : before) {
      ASSERT_TRUE(after.contains(gang)) << gang.value();
      EXPECT_LE(after.at(gang), start) << gang.value();
    }
  }
}

// Random fleets of 2–4 racks of 2–4 nodes: random running gangs, three
// rack-sized gangs of priority 1 that reserve (depth 3), then a burst of
// priority-0 gangs with random estimates (some none). After their cycle
// every earlier reservation still stands with a start no later, and every
// admitted gang on a reserved node is expected to end by that start.
TEST_F(BackfillTest, PropertyBackfillNeverDelaysAReservation) {
  std::mt19937 random(20261201);
  int checked = 0;
  for (int round = 0; round < 150; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    now_ = kT0;
    const int racks = 2 + static_cast<int>(random() % 3);
    const int per_rack = 2 + static_cast<int>(random() % 3);
    Init(/*depth=*/3, racks, per_rack);
    auto estimate = [&] {
      return absl::Minutes(10 + static_cast<int>(random() % 600));
    };
    for (int i = 0; i < racks * per_rack + 2; ++i) {
      const int gpus = 1 << (random() % 4);
      Submit(WithEstimate(Spec("q").Pods(1, gpus), estimate()));
    }
    Cycle();
    for (int i = 0; i < 3; ++i) {
      Submit(
          WithEstimate(Spec("q").Pods(per_rack, 8).Required("rack").Priority(1),
                       estimate()));
    }
    Cycle();
    const auto before = Starts(*scheduler_);
    std::map<GangId, std::vector<NodeId>> held;
    for (const Reservation& r : scheduler_->reservations())
      held[r.gang] = r.nodes;
    std::vector<GangPtr> burst;
    for (int i = 0; i < 6; ++i) {
      const int gpus = 1 << (random() % 4);
      const absl::Duration e =
          random() % 5 == 0 ? absl::ZeroDuration() : estimate();
      burst.push_back(Submit(WithEstimate(Spec("q").Pods(1, gpus), e)));
    }
    Cycle();
    const auto after = Starts(*scheduler_);
    for (const auto& [gang, start] : before) {
      if (scheduler_->FindGang(gang)->state != GangState::kPending) continue;
      ASSERT_TRUE(after.contains(gang)) << gang.value();
      EXPECT_LE(after.at(gang), start) << gang.value();
      ++checked;
    }
    for (const GangPtr& b : burst) {
      const GangPtr gang = Get(b);
      if (gang->state != GangState::kAdmitted) continue;
      for (const auto& [holder, nodes] : held) {
        for (const PodPlacement& pod : gang->placement) {
          if (std::find(nodes.begin(), nodes.end(), pod.node) == nodes.end()) {
            continue;
          }
          EXPECT_GT(gang->spec.estimated_runtime, absl::ZeroDuration());
          EXPECT_LE(*gang->admit_time + gang->spec.estimated_runtime,
                    before.at(holder))
              << gang->id.value() << " on " << pod.node.value();
        }
      }
    }
  }
  EXPECT_GT(checked, 100);  // the property was exercised
}

}  // namespace
}  // namespace phalanx::core
