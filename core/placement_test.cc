#include "core/placement.h"

#include <map>
#include <set>
#include <string>

#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::MakeNodes;
using testing::Spec;

// A fleet of 1 block x 4 racks x 4 nodes of 8 GPUs, then `busy` nodes per
// rack fully allocated (rack index -> busy nodes).
Fleet MakeFleet(const std::map<int, int>& busy_per_rack) {
  Fleet fleet({"block", "rack"});
  fleet.Upsert(MakeNodes(1, 4, 4));
  Gang filler;
  filler.id = GangId("filler");
  filler.spec = Spec("q").Pods(1, 8, "p");
  for (const auto& [rack, busy] : busy_per_rack) {
    for (int n = 0; n < busy; ++n) {
      const NodeId node(absl::StrFormat("H100-0%d%02d", rack, n));
      EXPECT_TRUE(fleet
                      .Allocate(filler, GangHandle{0},
                                {{"p", 0, node, {0, 1, 2, 3, 4, 5, 6, 7}}})
                      .ok());
    }
  }
  return fleet;
}

std::map<std::string, int> PodsPerRack(const PlacementResult& result) {
  std::map<std::string, int> racks;
  for (const PodPlacement& pod : result.pods) {
    racks[pod.node.value().substr(0, 7)]++;
  }
  return racks;
}

TEST(PlacementTest, RequiredRackChoosesTightestRack) {
  // Free whole nodes per rack: 3, 3, 2, 1.
  Fleet fleet = MakeFleet({{0, 1}, {1, 1}, {2, 2}, {3, 3}});
  PlacementResult result =
      PlaceGang(Spec("q").Pods(2, 8).Required("rack"), fleet);
  ASSERT_TRUE(result.placed) << result.reason;
  EXPECT_THAT(PodsPerRack(result), ElementsAre(std::pair("H100-02", 2)));
}

// Fleet::version() moves with every allocation and release, but placement
// (which holds pod sets tentatively while it places the next) leaves it as
// it found it, so caches keyed on it survive a placement.
TEST(PlacementTest, PlacementLeavesTheFleetVersionAsItFoundIt) {
  Fleet fleet = MakeFleet({{0, 1}});
  const uint64_t before = fleet.version();
  PlacementResult result =
      PlaceGang(Spec("q").Pods(2, 8, "a").Pods(3, 4, "b"), fleet);
  ASSERT_TRUE(result.placed) << result.reason;
  EXPECT_EQ(fleet.version(), before);
  Gang gang;
  gang.id = GangId("g");
  gang.spec = Spec("q").Pods(2, 8, "a").Pods(3, 4, "b");
  ASSERT_TRUE(fleet.Allocate(gang, GangHandle{0}, result.pods).ok());
  const uint64_t allocated = fleet.version();
  EXPECT_NE(allocated, before);
  fleet.Release(gang, GangHandle{0}, result.pods);
  EXPECT_NE(fleet.version(), allocated);
  fleet.RestoreVersion(before);
  EXPECT_EQ(fleet.version(), before);
}

TEST(PlacementTest, RequiredBlockTakesLargestRacksThenTightestRemainder) {
  Fleet fleet = MakeFleet({{0, 1}, {1, 1}, {2, 2}, {3, 3}});
  PlacementResult result =
      PlaceGang(Spec("q").Pods(7, 8).Required("block"), fleet);
  ASSERT_TRUE(result.placed) << result.reason;
  EXPECT_THAT(PodsPerRack(result),
              ElementsAre(std::pair("H100-00", 3), std::pair("H100-01", 3),
                          std::pair("H100-03", 1)));
}

TEST(PlacementTest, RequiredRackThatFitsNowhereExplainsTheBestRack) {
  Fleet fleet = MakeFleet({{0, 1}, {1, 1}, {2, 2}, {3, 3}});
  PlacementResult result =
      PlaceGang(Spec("q").Pods(4, 8).Required("rack"), fleet);
  EXPECT_FALSE(result.placed);
  EXPECT_TRUE(result.pods.empty());
  EXPECT_EQ(result.reason,
            "NO_FIT at level rack: largest free rack fits 3 of 4 pods");
}

TEST(PlacementTest, PreferredWalksUpToTheBlock) {
  Fleet fleet = MakeFleet({{0, 1}, {1, 1}, {2, 2}, {3, 3}});
  PlacementResult result =
      PlaceGang(Spec("q").Pods(4, 8).Preferred("rack"), fleet);
  ASSERT_TRUE(result.placed) << result.reason;
  EXPECT_EQ(result.pods.size(), 4u);
  EXPECT_THAT(PodsPerRack(result),
              ElementsAre(std::pair("H100-00", 3), std::pair("H100-03", 1)));
}

TEST(PlacementTest, SlicesKeepEachSliceInOneRack) {
  // Free whole nodes per rack: 3, 3, 2, 1. Unsliced, 6 pods take 3 + 3;
  // in slices of 2 per rack each rack holds one slice: 2 + 2 + 2.
  Fleet fleet = MakeFleet({{0, 1}, {1, 1}, {2, 2}, {3, 3}});
  PlacementResult result = PlaceGang(
      Spec("q").Pods(6, 8).Required("block").Slices(2, "rack"), fleet);
  ASSERT_TRUE(result.placed) << result.reason;
  EXPECT_THAT(PodsPerRack(result),
              ElementsAre(std::pair("H100-00", 2), std::pair("H100-01", 2),
                          std::pair("H100-02", 2)));
}

TEST(PlacementTest, SliceLargerThanAnyRackExplainsInSlices) {
  Fleet fleet = MakeFleet({{0, 1}, {1, 1}, {2, 2}, {3, 3}});
  PlacementResult result = PlaceGang(
      Spec("q").Pods(4, 8).Required("block").Slices(4, "rack"), fleet);
  EXPECT_FALSE(result.placed);
  EXPECT_EQ(result.reason,
            "NO_FIT: the largest block holds 0 of 1 slices of 4 pods in one "
            "rack");
}

TEST(PlacementTest, NodeSlicesPutEachSliceOnOneNode) {
  // Every node has 6 of 8 GPUs free: 3 pods of 2 GPUs. Slices of 2 pods
  // per node leave the third pod's room on each node unused.
  Fleet fleet = MakeFleet({});
  Gang pin;
  pin.id = GangId("pin");
  pin.spec = Spec("q").Pods(1, 2, "p");
  for (const Fleet::Slot& slot : std::vector<Fleet::Slot>(fleet.slots())) {
    ASSERT_TRUE(
        fleet
            .Allocate(pin, GangHandle{0}, {{"p", 0, slot.node.spec.id, {0, 1}}})
            .ok());
  }
  PlacementResult result =
      PlaceGang(Spec("q").Pods(6, 2).Slices(2, "node"), fleet);
  ASSERT_TRUE(result.placed) << result.reason;
  std::map<std::string, int> per_node;
  for (const PodPlacement& pod : result.pods) per_node[pod.node.value()]++;
  EXPECT_EQ(per_node.size(), 3u);
  for (const auto& [node, pods] : per_node) EXPECT_EQ(pods, 2) << node;
}

TEST(PlacementTest, GroupedPodSetsShareOneRack) {
  // Free whole nodes per rack: 3, 3, 2, 1. Alone, 2 pods would take rack 2
  // and 1 pod rack 3; as a group they need one rack with 3 free nodes.
  Fleet fleet = MakeFleet({{0, 1}, {1, 1}, {2, 2}, {3, 3}});
  GangSpec spec = Spec("q")
                      .Pods(2, 8, "workers")
                      .Required("rack")
                      .Group("g")
                      .Pods(1, 8, "server")
                      .Required("rack")
                      .Group("g");
  PlacementResult result = PlaceGang(spec, fleet);
  ASSERT_TRUE(result.placed) << result.reason;
  EXPECT_THAT(PodsPerRack(result), ElementsAre(std::pair("H100-00", 3)));
  EXPECT_EQ(result.pods[0].pod_set, "workers");
  EXPECT_EQ(result.pods[2].pod_set, "server");
}

TEST(PlacementTest, GroupThatFitsNoRackTogetherSaysSo) {
  Fleet fleet = MakeFleet({{0, 1}, {1, 1}, {2, 2}, {3, 3}});
  GangSpec spec = Spec("q")
                      .Pods(2, 8)
                      .Required("rack")
                      .Group("g")
                      .Pods(2, 8)
                      .Required("rack")
                      .Group("g");
  PlacementResult result = PlaceGang(spec, fleet);
  EXPECT_FALSE(result.placed);
  EXPECT_EQ(result.reason,
            "NO_FIT: group g: no rack fits all of its pod sets together");
}

TEST(PlacementTest, PodsOnOneNodeGetDistinctGpus) {
  Fleet fleet = MakeFleet({});
  PlacementResult result =
      PlaceGang(Spec("q").Pods(2, 4).Required("node"), fleet);
  ASSERT_TRUE(result.placed) << result.reason;
  ASSERT_EQ(result.pods.size(), 2u);
  EXPECT_EQ(result.pods[0].node, result.pods[1].node);
  EXPECT_THAT(result.pods[0].gpu_indices, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(result.pods[1].gpu_indices, ElementsAre(4, 5, 6, 7));
}

TEST(PlacementTest, UnconstrainedPacksThePartlyUsedNodeFirst) {
  Fleet fleet = MakeFleet({});
  Gang half;
  half.id = GangId("half");
  half.spec = Spec("q").Pods(1, 4, "p");
  ASSERT_TRUE(fleet
                  .Allocate(half, GangHandle{0},
                            {{"p", 0, NodeId("H100-0203"), {0, 1, 2, 3}}})
                  .ok());
  PlacementResult result = PlaceGang(Spec("q").Pods(1, 4), fleet);
  ASSERT_TRUE(result.placed);
  EXPECT_EQ(result.pods[0].node, NodeId("H100-0203"));
  EXPECT_THAT(result.pods[0].gpu_indices, ElementsAre(4, 5, 6, 7));
}

TEST(PlacementTest, FleetIsUnchangedAfterPlacing) {
  Fleet fleet = MakeFleet({{0, 2}});
  PlaceGang(Spec("q").Pods(3, 8).Required("rack").Pods(2, 8).Required("rack"),
            fleet);
  int free = 0;
  for (const Fleet::Slot& slot : fleet.slots()) free += slot.FreeGpus();
  EXPECT_EQ(free, 14 * 8);
}

TEST(PlacementTest, PodSetsOfOneGangDoNotShareGpus) {
  Fleet fleet = MakeFleet({});
  PlacementResult result = PlaceGang(
      Spec("q").Pods(3, 8).Required("rack").Pods(4, 2).Required("rack"), fleet);
  ASSERT_TRUE(result.placed) << result.reason;
  std::set<std::pair<std::string, int>> gpus;
  for (const PodPlacement& pod : result.pods) {
    for (int gpu : pod.gpu_indices) {
      EXPECT_TRUE(gpus.insert({pod.node.value(), gpu}).second);
    }
  }
  EXPECT_EQ(gpus.size(), 32u);
}

TEST(PlacementTest, ModelPreferenceOrderAndNoMixing) {
  Fleet fleet({"block", "rack"});
  fleet.Upsert(MakeNodes(1, 1, 2, 8, "H100"));
  std::vector<Node> h200 = MakeNodes(1, 1, 2, 8, "H200");
  for (Node& node : h200) node.spec.labels["block"] = "b9";
  fleet.Upsert(h200);
  PlacementResult result =
      PlaceGang(Spec("q").Pods(2, 8).Models({"H200", "H100"}), fleet);
  ASSERT_TRUE(result.placed);
  for (const PodPlacement& pod : result.pods) {
    EXPECT_THAT(pod.node.value(), HasSubstr("H200"));
  }
  // Three whole nodes exist only across models: not without mixing.
  EXPECT_FALSE(PlaceGang(Spec("q").Pods(3, 8), fleet).placed);
  GangSpec mixed = Spec("q").Pods(3, 8);
  mixed.allow_mixed_models = true;
  EXPECT_TRUE(PlaceGang(mixed, fleet).placed);
}

TEST(PlacementTest, TotalBasisIgnoresUsageAndState) {
  Fleet fleet = MakeFleet({{0, 4}, {1, 4}, {2, 4}, {3, 4}});
  EXPECT_FALSE(PlaceGang(Spec("q").Pods(1, 8), fleet).placed);
  EXPECT_TRUE(PlaceGang(Spec("q").Pods(4, 8).Required("rack"), fleet,
                        CapacityBasis::kTotal)
                  .placed);
  PlacementResult never = PlaceGang(Spec("q").Pods(5, 8).Required("rack"),
                                    fleet, CapacityBasis::kTotal);
  EXPECT_FALSE(never.placed);
  EXPECT_EQ(never.reason,
            "can never fit: the largest rack holds 4 of 5 pods of 8 GPUs");
}

}  // namespace
}  // namespace phalanx::core
