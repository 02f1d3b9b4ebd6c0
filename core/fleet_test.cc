#include "core/fleet.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::IsEmpty;

// The gangs on slot `slot` as (handle, pods), sorted.
std::vector<std::pair<GangHandle, int>> GangPodsOn(const Fleet& fleet,
                                                   int slot) {
  std::vector<std::pair<GangHandle, int>> out;
  for (const Fleet::GangPods& on : fleet.slots()[slot].gang_pods) {
    out.emplace_back(on.gang, on.pods);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(FleetTest, EachSlotCountsThePodsOfEveryGangByHandle) {
  Fleet fleet({"block", "rack"});
  fleet.Upsert(testing::MakeNodes(1, 1, 2));
  Gang a;
  a.id = GangId("a");
  a.spec = testing::Spec("q").Pods(3, 2, "p");
  Gang b = a;
  b.id = GangId("b");
  const NodeId node = fleet.slots()[0].node.spec.id;
  const std::vector<PodPlacement> two = {{"p", 0, node, {0, 1}},
                                         {"p", 1, node, {2, 3}}};
  const std::vector<PodPlacement> one = {{"p", 0, node, {4, 5}}};
  const GangHandle ha{7};
  const GangHandle hb{2};
  ASSERT_TRUE(fleet.Allocate(a, ha, two).ok());
  ASSERT_TRUE(fleet.Allocate(b, hb, one).ok());
  EXPECT_EQ(GangPodsOn(fleet, 0),
            (std::vector<std::pair<GangHandle, int>>{{hb, 1}, {ha, 2}}));
  EXPECT_FALSE(fleet.Allocate(b, hb, one).ok()) << "GPUs 4, 5 are held";
  fleet.Release(a, ha, two);
  EXPECT_EQ(GangPodsOn(fleet, 0),
            (std::vector<std::pair<GangHandle, int>>{{hb, 1}}));
  fleet.Release(b, hb, one);
  EXPECT_THAT(fleet.slots()[0].gang_pods, IsEmpty());
  EXPECT_TRUE(fleet.slots()[0].Idle());
}

TEST(FleetTest, EachSlotKnowsItsModelsIndexAcrossUpserts) {
  Fleet fleet({"block", "rack"});
  std::vector<Node> nodes = testing::MakeNodes(1, 1, 2);
  nodes[1].spec.gpu_model = "H200";
  fleet.Upsert(nodes);
  for (const Fleet::Slot& slot : fleet.slots()) {
    EXPECT_EQ(slot.model, fleet.ModelIndex(slot.node.spec.gpu_model));
  }
  // A model sorting first moves the others' indices.
  Node a100 = nodes[0];
  a100.spec.gpu_model = "A100";
  fleet.Upsert({a100});
  ASSERT_EQ(fleet.Models().front(), "A100");
  for (const Fleet::Slot& slot : fleet.slots()) {
    EXPECT_EQ(fleet.Models()[slot.model], slot.node.spec.gpu_model);
  }
}

// The layout (what a slot index names) holds while only node states
// change; adding or removing a node, or changing a spec, moves it.
TEST(FleetTest, TheLayoutVersionMovesWithSlotsAndSpecsNotStates) {
  Fleet fleet({"block", "rack"});
  std::vector<Node> nodes = testing::MakeNodes(1, 1, 3);
  fleet.Upsert(nodes);
  const uint64_t layout = fleet.layout_version();
  const uint64_t structure = fleet.structure_version();
  Node failed = nodes[1];
  failed.state = NodeState::kUnhealthy;
  fleet.Upsert({failed});
  EXPECT_EQ(fleet.layout_version(), layout);
  EXPECT_NE(fleet.structure_version(), structure);
  Node bigger = nodes[1];
  bigger.spec.gpu_count = 16;
  fleet.Upsert({bigger});
  EXPECT_NE(fleet.layout_version(), layout);
  const uint64_t resized = fleet.layout_version();
  ASSERT_TRUE(fleet.Remove(nodes[2].spec.id));
  EXPECT_NE(fleet.layout_version(), resized);
}

}  // namespace
}  // namespace phalanx::core
