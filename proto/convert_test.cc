#include "proto/convert.h"

#include "core/testing.h"
#include "gtest/gtest.h"

namespace phalanx::convert {
namespace {

TEST(ConvertTest, GangRoundTrips) {
  core::Gang gang;
  gang.id = core::GangId("g-000007");
  gang.spec = core::testing::Spec("llm").Pods(4, 8).Required("rack").Models(
      {"H200", "H100"});
  gang.spec.labels = {{"team", "pretrain"}};
  gang.spec.estimated_runtime = absl::Hours(3);
  gang.state = core::GangState::kAdmitted;
  gang.submit_time = absl::FromUnixMillis(1'700'000'000'123);
  gang.admit_time = gang.submit_time + absl::Seconds(5);
  gang.placement = {{"set-0", 0, core::NodeId("n1"), {0, 1, 2, 3, 4, 5, 6, 7}}};
  gang.revision = 42;
  gang.attempts = 1;
  pb::Gang proto;
  ToProto(gang, &proto);
  auto back = GangFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, gang);
}

// Found by fuzz/request_fuzzer: a report's checkpoint time past the year
// 2262 was stored as the saturated nanosecond count and read back as
// another time.
TEST(ConvertTest, TimesAndDurationsRoundTripExactlyFarOut) {
  for (absl::Time time :
       {absl::UnixEpoch(), absl::FromUnixNanos(-1),
        absl::FromUnixMillis(1'700'000'000'123),
        absl::FromUnixSeconds(9'223'372'036'854) + absl::Nanoseconds(5),
        absl::FromUnixSeconds(-62'135'596'800)}) {
    google::protobuf::Timestamp ts;
    ToProto(time, &ts);
    EXPECT_GE(ts.nanos(), 0);
    EXPECT_LT(ts.nanos(), 1'000'000'000);
    EXPECT_EQ(FromProto(ts), time) << ts.DebugString();
  }
  for (absl::Duration d : {absl::ZeroDuration(), absl::Nanoseconds(-1),
                           absl::Seconds(-3) - absl::Milliseconds(7),
                           absl::Hours(24 * 365 * 1000) + absl::Nanoseconds(1),
                           -absl::Hours(24 * 365 * 1000)}) {
    google::protobuf::Duration proto;
    ToProto(d, &proto);
    EXPECT_FALSE(proto.seconds() > 0 && proto.nanos() < 0);
    EXPECT_FALSE(proto.seconds() < 0 && proto.nanos() > 0);
    EXPECT_EQ(FromProto(proto), d) << proto.DebugString();
  }
}

TEST(ConvertTest, UnknownEnumValuesNameTheField) {
  pb::GangSpec spec;
  spec.add_pod_sets()->mutable_topology()->set_mode(
      static_cast<pb::TopologyMode>(9));
  auto result = GangSpecFromProto(spec, "spec");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(result.status().message(),
            "spec.pod_sets[0].topology.mode: unknown value 9");
}

TEST(ConvertTest, ConfigDefaultsFillUnsetFields) {
  pb::Config proto;
  proto.add_topology_levels("block");
  auto config = ConfigFromProto(proto, "config");
  ASSERT_TRUE(config.ok());
  core::Config expected;
  expected.topology_levels = {"block"};
  EXPECT_EQ(*config, expected);
  pb::Config again;
  ToProto(*config, &again);
  EXPECT_EQ(*ConfigFromProto(again, "config"), expected);
}

TEST(ConvertTest, PreemptionHorizonRoundTrips) {
  pb::Config proto;
  proto.mutable_preemption()->mutable_horizon()->set_seconds(600);
  auto config = ConfigFromProto(proto, "config");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->preemption.horizon, absl::Minutes(10));
  proto.mutable_preemption()->mutable_horizon()->set_seconds(0);
  EXPECT_EQ(ConfigFromProto(proto, "config")->preemption.horizon,
            absl::ZeroDuration());
  pb::Config again;
  ToProto(*config, &again);
  EXPECT_EQ(again.preemption().horizon().seconds(), 600);
}

TEST(ConvertTest, NodeDrainDeadlineRoundTrips) {
  core::Node node;
  node.spec.id = core::NodeId("n1");
  node.spec.gpu_model = "H100";
  node.spec.gpu_count = 8;
  node.state = core::NodeState::kDraining;
  node.drain_deadline = absl::FromUnixSeconds(1'700'003'600);
  pb::Node proto;
  ToProto(node, &proto);
  EXPECT_EQ(proto.drain_deadline().seconds(), 1'700'003'600);
  auto back = NodeFromProto(proto, "node");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, node);
  node.drain_deadline.reset();
  pb::Node without;
  ToProto(node, &without);
  EXPECT_FALSE(without.has_drain_deadline());
  EXPECT_EQ(*NodeFromProto(without, "node"), node);
}

}  // namespace
}  // namespace phalanx::convert
