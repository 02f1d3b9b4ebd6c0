#include "core/validate.h"

#include "core/testing.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using testing::Spec;

TEST(ValidateTest, AcceptsAPlainSpec) {
  EXPECT_TRUE(
      ValidateGangSpec(Spec("q").Pods(2, 8).Required("rack"), "spec").ok());
}

TEST(ValidateTest, NamesTheBadField) {
  GangSpec spec = Spec("q").Pods(1, 8).Pods(1, 65);
  absl::Status status = ValidateGangSpec(spec, "spec");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "spec.pod_sets[1].gpus: must be in 0..64");

  spec = Spec("q").Pods(1, 8, "w").Pods(1, 8, "w");
  EXPECT_EQ(ValidateGangSpec(spec, "spec").message(),
            "spec.pod_sets[1].name: duplicate pod set name \"w\"");

  spec = Spec("q").Pods(1, 0);
  EXPECT_EQ(ValidateGangSpec(spec, "spec").message(),
            "spec.pod_sets[0].gpus: a pod must request GPUs, CPU or memory");

  spec = Spec("q").Pods(1, 8);
  spec.pod_sets[0].topology.mode = TopologyMode::kRequired;
  EXPECT_EQ(ValidateGangSpec(spec, "spec").message(),
            "spec.pod_sets[0].topology.level: required for REQUIRED and "
            "PREFERRED");

  spec = Spec("").Pods(1, 8);
  EXPECT_EQ(ValidateGangSpec(spec, "spec").message(),
            "spec.queue: must not be empty");

  spec = Spec("q").Pods(6, 8).Slices(4, "rack");
  EXPECT_EQ(ValidateGangSpec(spec, "spec").message(),
            "spec.pod_sets[0].slice.size: must divide count (6)");
  spec = Spec("q").Pods(1, 8).Required("rack").Group("g").Pods(1, 8).Group("g");
  EXPECT_EQ(ValidateGangSpec(spec, "spec").message(),
            "spec.pod_sets[1].topology: must equal that of pod set \"set-0\" "
            "in group \"g\"");
  spec = Spec("q").Pods(1, 8).Required("node").Group("g");
  EXPECT_EQ(ValidateGangSpec(spec, "spec").message(),
            "spec.pod_sets[0].group: a group shares a domain above the node "
            "level, not \"node\"");
  spec = Spec("q").Pods(6, 8).Slices(2, "");
  EXPECT_EQ(ValidateGangSpec(spec, "spec").message(),
            "spec.pod_sets[0].slice.level: required when slice.size is set");
}

TEST(ValidateTest, NodeAndConfigErrorsNameTheField) {
  NodeSpec node;
  node.id = NodeId("n1");
  node.gpu_model = "H100";
  node.gpu_count = 0;
  EXPECT_EQ(ValidateNodeSpec(node, "nodes[2]").message(),
            "nodes[2].gpu_count: must be in 1..64");
  Config config;
  config.topology_levels = {"rack", "rack"};
  EXPECT_EQ(ValidateConfig(config, "config").message(),
            "config.topology_levels[1]: duplicate level \"rack\"");
}

}  // namespace
}  // namespace phalanx::core
