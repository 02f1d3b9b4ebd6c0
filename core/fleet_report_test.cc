#include "core/fleet_report.h"

#include "core/testing.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

TEST(FleetReportTest, CountsFreeWholeNodesAndFragmentation) {
  Fleet fleet({"block", "rack"});
  fleet.Upsert(testing::MakeNodes(1, 2, 2));
  Gang gang;
  gang.id = GangId("g");
  gang.spec = testing::Spec("q").Pods(1, 4, "p");
  // Half of one node in rack 0 is used: rack 0 keeps 1 whole node, rack 1 2.
  ASSERT_TRUE(fleet
                  .Allocate(gang, GangHandle{0},
                            {{"p", 0, NodeId("H100-0000"), {0, 1, 2, 3}}})
                  .ok());
  FleetReport report = DescribeFleet(fleet);
  ASSERT_EQ(report.domains.size(), 3u);
  EXPECT_EQ(report.domains[0].path, "b0");
  EXPECT_EQ(report.domains[0].gpus_free, 28);
  EXPECT_EQ(report.domains[1].path, "b0/r0-0");
  EXPECT_EQ(report.domains[1].free_whole_nodes, 1);
  EXPECT_EQ(report.domains[2].free_whole_nodes, 2);
  EXPECT_DOUBLE_EQ(report.node_fragmentation, 4.0 / 28.0);
  ASSERT_EQ(report.levels.size(), 2u);
  EXPECT_EQ(report.levels[1].largest_free_whole_nodes, 2);
  EXPECT_DOUBLE_EQ(report.levels[1].stranded_whole_node_fraction, 1.0 / 3.0);
  EXPECT_EQ(report.gpus_by_model["H100"].allocated, 4);
  EXPECT_EQ(report.gpus_by_model["H100"].free, 28);
}

}  // namespace
}  // namespace phalanx::core
