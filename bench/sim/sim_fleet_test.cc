#include "bench/sim/sim_fleet.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(MakeFleetTest, FillsRacksAndBlocksInOrder) {
  FleetOptions options;
  options.nodes = 48;
  auto fleet = MakeFleet(options);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  EXPECT_EQ(fleet->nodes.size(), 48u);
  EXPECT_EQ(fleet->TotalGpus(), 384);
  EXPECT_THAT(fleet->levels, ElementsAre("block", "rack"));
  EXPECT_EQ(fleet->gpus_per_node, 8);
  EXPECT_EQ(fleet->nodes_per_rack, 16);
  EXPECT_EQ(fleet->nodes_per_block, 48);  // one partial block of 3 racks
  EXPECT_EQ(fleet->nodes[17].spec.labels.at("rack"), "r0001");
  EXPECT_THAT(fleet->GpusByModel(), ElementsAre(Pair("H100", 384)));
}

TEST(MakeFleetTest, DefaultIsFourBlocksOfSixtyFourNodes) {
  auto fleet = MakeFleet({});
  ASSERT_TRUE(fleet.ok());
  EXPECT_EQ(fleet->TotalGpus(), 2048);
  EXPECT_EQ(fleet->nodes_per_block, 64);
  EXPECT_EQ(fleet->nodes.back().spec.labels.at("block"), "b003");
}

TEST(MakeFleetTest, RefusesBadShapes) {
  FleetOptions options;
  options.gpus_per_node = 65;
  EXPECT_THAT(MakeFleet(options).status().message(),
              HasSubstr("--gpus-per-node"));
  options = {};
  options.nodes = 0;
  EXPECT_FALSE(MakeFleet(options).ok());
}

TEST(ParseFleetJsonTest, ReadsTheDaemonsFleetFormat) {
  auto fleet = ParseFleetJson(R"({"nodes": [
    {"id": "a1", "gpuModel": "H100", "gpuCount": 8, "cpuMillis": "192000",
     "labels": {"block": "b1", "rack": "r1"}},
    {"id": "a2", "gpu_model": "H100", "gpu_count": 8,
     "labels": {"block": "b1", "rack": "r1"}, "state": "NODE_STATE_CORDONED"},
    {"id": "a3", "gpuModel": "H200", "gpuCount": 8,
     "labels": {"block": "b1", "rack": "r2"}}]})");
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  EXPECT_THAT(fleet->levels, ElementsAre("block", "rack"));
  EXPECT_EQ(fleet->nodes_per_rack, 2);
  EXPECT_EQ(fleet->nodes_per_block, 3);
  EXPECT_EQ(fleet->nodes[0].spec.cpu_millis, 192000);
  EXPECT_EQ(fleet->nodes[1].state, core::NodeState::kCordoned);
  EXPECT_THAT(fleet->GpusByModel(),
              ElementsAre(Pair("H100", 16), Pair("H200", 8)));
}

TEST(ParseFleetJsonTest, KeepsOnlyLevelsEveryNodeLabels) {
  auto fleet = ParseFleetJson(R"({"nodes": [
    {"id": "a1", "gpuModel": "H100", "gpuCount": 8, "labels": {"rack": "r1"}},
    {"id": "a2", "gpuModel": "H100", "gpuCount": 8,
     "labels": {"rack": "r1", "block": "b"}}]})");
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  EXPECT_THAT(fleet->levels, ElementsAre("rack"));
  EXPECT_EQ(fleet->nodes_per_rack, 2);
  EXPECT_EQ(fleet->nodes_per_block, 0);
}

TEST(ParseFleetJsonTest, NamesTheBadField) {
  EXPECT_THAT(
      ParseFleetJson(R"({"nodes": [{"gpuCount": 8}]})").status().message(),
      HasSubstr("nodes[0].id"));
  EXPECT_THAT(ParseFleetJson(R"({"nodes": [{"id": "a", "gpuCount": "x"}]})")
                  .status()
                  .message(),
              HasSubstr("nodes[0].gpuCount"));
  EXPECT_FALSE(ParseFleetJson(R"({"nodes": []})").ok());
  EXPECT_THAT(ParseFleetJson(R"({"nodes": [{"id": "a", "labels": [1]}]})")
                  .status()
                  .message(),
              HasSubstr("nodes[0].labels"));
}

TEST(ParseFleetJsonTest, RefusesMalformedJson) {
  for (const char* bad :
       {"{", "[1,]", "{\"nodes\" 1}", "\"open", "1 2", "[\"\\ud800\"]", "[]"}) {
    EXPECT_EQ(ParseFleetJson(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace phalanx::bench
