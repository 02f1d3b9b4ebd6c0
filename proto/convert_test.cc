#include "proto/convert.h"

#include "absl/strings/str_cat.h"
#include "core/testing.h"
#include "core/validate.h"
#include "gmock/gmock.h"
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
  gang.on_loan = true;
  pb::Gang proto;
  ToProto(gang, &proto);
  EXPECT_TRUE(proto.on_loan());
  auto back = GangFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, gang);
}

TEST(ConvertTest, LeaseAndGraceDeadlineRoundTrip) {
  core::Gang gang;
  gang.id = core::GangId("g-000008");
  gang.spec = core::testing::Spec("llm").Pods(1, 8);
  gang.spec.lease_duration = absl::Seconds(30);
  gang.state = core::GangState::kPreempting;
  gang.submit_time = absl::FromUnixSeconds(1'700'000'000);
  gang.lease_expire_time = gang.submit_time + absl::Seconds(40);
  gang.grace_deadline = gang.submit_time + absl::Minutes(5);
  pb::Gang proto;
  ToProto(gang, &proto);
  EXPECT_EQ(proto.spec().lease_duration().seconds(), 30);
  EXPECT_EQ(proto.lease_expire_time().seconds(), 1'700'000'040);
  EXPECT_EQ(proto.grace_deadline().seconds(), 1'700'000'300);
  auto back = GangFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, gang);
}

TEST(ConvertTest, RunHistoryRoundTripsAndAnOldRecordReadsAsUnset) {
  core::Gang gang;
  gang.id = core::GangId("g-000010");
  gang.spec = core::testing::Spec("llm").Pods(1, 8);
  gang.state = core::GangState::kAdmitted;
  gang.submit_time = absl::FromUnixSeconds(1'700'000'000);
  gang.first_admit_time = gang.submit_time + absl::Seconds(3);
  gang.admit_time = gang.submit_time + absl::Minutes(20);
  gang.previous_run_time = absl::Minutes(12) + absl::Milliseconds(250);
  gang.attempts = 2;
  gang.preemptions = 1;
  pb::Gang proto;
  ToProto(gang, &proto);
  EXPECT_EQ(proto.first_admit_time().seconds(), 1'700'000'003);
  EXPECT_EQ(proto.previous_run_time().seconds(), 720);
  EXPECT_EQ(proto.previous_run_time().nanos(), 250'000'000);
  EXPECT_EQ(proto.preemptions(), 1);
  auto back = GangFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, gang);
  // A record stored before these fields were kept.
  proto.clear_first_admit_time();
  proto.clear_previous_run_time();
  proto.clear_preemptions();
  back = GangFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->first_admit_time.has_value());
  EXPECT_EQ(back->previous_run_time, absl::ZeroDuration());
  EXPECT_EQ(back->preemptions, 0);
}

TEST(ConvertTest, EveryReasonCodeRoundTripsAndAnUnknownOneIsNone) {
  core::Gang gang;
  gang.id = core::GangId("g-000009");
  gang.spec = core::testing::Spec("llm").Pods(1, 8);
  gang.submit_time = absl::FromUnixSeconds(1'700'000'000);
  for (int code = 0; code < core::kReasonCodeCount; ++code) {
    gang.reason_code = static_cast<core::ReasonCode>(code);
    gang.reason = core::ReasonCodeName(gang.reason_code);
    pb::Gang proto;
    ToProto(gang, &proto);
    // The API's enum names the same code.
    EXPECT_EQ(pb::ReasonCode_Name(proto.reason_code()),
              code == 0 ? std::string("REASON_CODE_UNSPECIFIED")
                        : absl::StrCat("REASON_CODE_", gang.reason));
    auto back = GangFromProto(proto);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, gang);
  }
  pb::Gang newer;
  ToProto(gang, &newer);
  newer.set_reason_code(static_cast<pb::ReasonCode>(99));
  auto back = GangFromProto(newer);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->reason_code, core::ReasonCode::kNone);
  EXPECT_EQ(back->reason, gang.reason);
}

TEST(ConvertTest, NodeAddressDefaultsToTheId) {
  pb::Node proto;
  proto.set_id("n-1");
  proto.set_gpu_model("H100");
  proto.set_gpu_count(8);
  auto node = NodeFromProto(proto, "nodes[0]");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->spec.address, "");
  pb::Node out;
  ToProto(*node, &out);
  EXPECT_EQ(out.address(), "n-1");  // shown as the id
  proto.set_address("10.0.0.9");
  node = NodeFromProto(proto, "nodes[0]");
  ASSERT_TRUE(node.ok());
  ToProto(*node, &out);
  EXPECT_EQ(out.address(), "10.0.0.9");
  proto.set_address("n-1");  // the id itself is the default
  EXPECT_EQ(NodeFromProto(proto, "nodes[0]")->spec.address, "");
}

TEST(ConvertTest, AnUnsetQueueWeightIsOneAndAnExplicitZeroStays) {
  pb::Queue proto;
  proto.set_name("q");
  EXPECT_EQ(QueueFromProto(proto).weight, 1.0);
  proto.set_weight(0);
  EXPECT_EQ(QueueFromProto(proto).weight, 0.0);
  pb::Queue out;
  ToProto(QueueFromProto(proto), &out);
  EXPECT_TRUE(out.has_weight());
  EXPECT_EQ(out.weight(), 0.0);
}

TEST(ConvertTest, CheckpointedEventsRoundTrip) {
  core::Event event;
  event.revision = 9;
  event.type = core::EventType::kCheckpointed;
  event.time = absl::FromUnixSeconds(1'700'000'000);
  pb::GangEvent proto;
  ToProto(event, &proto);
  EXPECT_EQ(proto.type(), pb::EVENT_TYPE_CHECKPOINTED);
  auto back = EventFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->type, core::EventType::kCheckpointed);
}

// Found by tests/fuzz/request_fuzzer: a report's checkpoint time past the year
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

TEST(ConvertTest, PolicyLeversRoundTripAndSetBeatsTheDefault) {
  core::Config config;
  config.reservation.choose_by_stranding =
      !config.reservation.choose_by_stranding;
  config.placement.end_time_packing = !config.placement.end_time_packing;
  config.placement.fragmentation_scoring =
      !config.placement.fragmentation_scoring;
  config.preemption.min_preemptor_priority = 7;
  config.preemption.max_victim_loss = absl::Minutes(10);
  config.admission.fair_share_first_below_priority = 2;
  config.admission.aging_per_hour = 0.25;
  config.admission.aging_max_levels = 3;
  config.admission.fair_share_size_credit = 1.5;
  config.reservation.window = absl::Hours(24);
  config.reservation.max_takeovers = 2;
  config.reservation.for_quota_waits = !config.reservation.for_quota_waits;
  config.reservation.preemptible_backfill =
      !config.reservation.preemptible_backfill;
  config.placement.domain_end_time_packing =
      !config.placement.domain_end_time_packing;
  pb::Config proto;
  ToProto(config, &proto);
  auto back = ConfigFromProto(proto, "config");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, config);
  proto.mutable_preemption()->mutable_max_victim_loss()->set_seconds(-1);
  EXPECT_EQ(core::ValidateConfig(*ConfigFromProto(proto, "config"), "config")
                .message(),
            "config.preemption.max_victim_loss: must be >= 0");
  proto.mutable_preemption()->clear_max_victim_loss();
  proto.mutable_reservation()->mutable_window()->set_seconds(-1);
  EXPECT_EQ(core::ValidateConfig(*ConfigFromProto(proto, "config"), "config")
                .message(),
            "config.reservation.window: must be >= 0");
  proto.mutable_reservation()->clear_window();
  proto.mutable_reservation()->set_max_takeovers(-2);
  EXPECT_EQ(core::ValidateConfig(*ConfigFromProto(proto, "config"), "config")
                .message(),
            "config.reservation.max_takeovers: must be >= -1");
  // Unset: the defaults (no tier, no window).
  pb::Config empty;
  auto defaults = ConfigFromProto(empty, "config");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->admission.fair_share_first_below_priority,
            core::AdmissionConfig().fair_share_first_below_priority);
  EXPECT_EQ(defaults->reservation.window, absl::ZeroDuration());
  EXPECT_EQ(defaults->reservation.max_takeovers, -1);
  EXPECT_FALSE(defaults->reservation.for_quota_waits);
  EXPECT_FALSE(defaults->reservation.preemptible_backfill);
  EXPECT_EQ(defaults->admission.aging_per_hour, 0);
  EXPECT_EQ(defaults->admission.aging_max_levels, 1);
  EXPECT_EQ(defaults->admission.fair_share_size_credit, 0);
  // A default configuration writes none of them.
  pb::Config written;
  ToProto(core::Config(), &written);
  EXPECT_FALSE(written.admission().has_aging_per_hour());
  EXPECT_FALSE(written.admission().has_aging_max_levels());
  EXPECT_FALSE(written.admission().has_fair_share_size_credit());
}

TEST(ConvertTest, FairOrderLeversRoundTrip) {
  for (absl::Duration bound : {absl::Hours(12), absl::InfiniteDuration()}) {
    core::Config config;
    config.admission.fair_share_wait_bound = bound;
    config.fair_share.decayed_usage_only = true;
    pb::Config proto;
    ToProto(config, &proto);
    EXPECT_EQ(proto.admission().fair_share_wait_bound_disabled(),
              bound == absl::InfiniteDuration());
    auto back = ConfigFromProto(proto, "config");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, config);
  }
  // Unset: the daemon's default.
  auto defaults = ConfigFromProto(pb::Config(), "config");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->admission.fair_share_wait_bound,
            core::AdmissionConfig().fair_share_wait_bound);
  EXPECT_FALSE(defaults->fair_share.decayed_usage_only);
  // Set to 0: refused, naming the field.
  pb::Config zero;
  zero.mutable_admission()->mutable_fair_share_wait_bound()->set_seconds(0);
  EXPECT_EQ(core::ValidateConfig(*ConfigFromProto(zero, "config"), "config")
                .message(),
            "config.admission.fair_share_wait_bound: must be > 0");
}

TEST(ConvertTest, PlanningRoundTripsAndUnsetTakesTheDefaults) {
  auto defaults = ConfigFromProto(pb::Config(), "config");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->planning, core::PlanningConfig());
  EXPECT_EQ(defaults->planning.max_gangs, 500);
  EXPECT_EQ(defaults->planning.window, absl::Hours(24 * 7));
  EXPECT_FALSE(defaults->planning.binding);

  core::Config config;
  config.planning.max_gangs = 0;  // explicit 0: the plan off, not the default
  config.planning.window = absl::Hours(2);
  config.planning.interval = absl::Seconds(5);
  config.planning.default_runtime = absl::Minutes(90);
  config.planning.binding = false;
  pb::Config proto;
  ToProto(config, &proto);
  EXPECT_TRUE(proto.planning().has_max_gangs());
  EXPECT_EQ(proto.planning().window().seconds(), 7200);
  auto back = ConfigFromProto(proto, "config");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->planning, config.planning);
  EXPECT_EQ(*back, config);

  proto.mutable_planning()->mutable_interval()->set_nanos(-1);
  EXPECT_EQ(ConfigFromProto(proto, "config").status().message(),
            "config.planning.interval.nanos: must have the sign of seconds "
            "(5 s, -1 ns)");
  proto.mutable_planning()->mutable_interval()->set_nanos(0);
  proto.mutable_planning()->set_max_gangs(10001);
  EXPECT_EQ(core::ValidateConfig(*ConfigFromProto(proto, "config"), "config")
                .message(),
            "config.planning.max_gangs: must be in 0..10000");
}

TEST(ConvertTest, PlanStatusesShareTheirNamesWithTheApi) {
  using core::PlanStatus;
  for (PlanStatus status :
       {PlanStatus::kNotPending, PlanStatus::kUnplanned, PlanStatus::kPlanned,
        PlanStatus::kBeyondDepth, PlanStatus::kBeyondWindow,
        PlanStatus::kNeverFits}) {
    EXPECT_EQ(pb::PlanStatus_Name(ToProto(status)),
              absl::StrCat("PLAN_STATUS_", core::PlanStatusName(status)));
  }
}

TEST(ConvertTest, APlannedStartFillsTheGangsPlanFields) {
  core::PlannedStart planned;
  planned.status = core::PlanStatus::kPlanned;
  planned.start = absl::FromUnixSeconds(1'700'000'600);
  planned.domain = "block-a/rack-3";
  planned.rank = 4;
  pb::Gang gang;
  ToProto(planned, &gang);
  EXPECT_EQ(gang.plan_status(), pb::PLAN_STATUS_PLANNED);
  EXPECT_EQ(gang.estimated_start().seconds(), 1'700'000'600);
  EXPECT_EQ(gang.planned_domain(), "block-a/rack-3");
  EXPECT_EQ(gang.plan_rank(), 4);

  planned.domain = "";  // the whole fleet
  pb::Gang fleet;
  ToProto(planned, &fleet);
  EXPECT_EQ(fleet.planned_domain(), "/");

  // Not planned: only the status.
  core::PlannedStart beyond;
  beyond.status = core::PlanStatus::kBeyondDepth;
  pb::Gang waiting;
  ToProto(beyond, &waiting);
  EXPECT_EQ(waiting.plan_status(), pb::PLAN_STATUS_BEYOND_DEPTH);
  EXPECT_FALSE(waiting.has_estimated_start());
  EXPECT_EQ(waiting.planned_domain(), "");
  EXPECT_EQ(waiting.plan_rank(), 0);
}

TEST(ConvertTest, TheGangsPlanFieldsAreNeitherWrittenNorRead) {
  core::Gang gang;
  gang.id = core::GangId("g-000010");
  gang.spec = core::testing::Spec("llm").Pods(1, 8);
  gang.submit_time = absl::FromUnixSeconds(1'700'000'000);
  pb::Gang proto;
  ToProto(gang, &proto);
  EXPECT_EQ(proto.plan_status(), pb::PLAN_STATUS_UNSPECIFIED);
  EXPECT_FALSE(proto.has_estimated_start());
  // A record carrying them reads as the same gang: they are ignored.
  proto.set_plan_status(pb::PLAN_STATUS_PLANNED);
  proto.set_planned_domain("/");
  proto.set_plan_rank(1);
  *proto.mutable_estimated_start() = proto.submit_time();
  auto back = GangFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, gang);
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

TEST(ConvertTest, NodeHealthRoundTrips) {
  core::Node node;
  node.spec.id = core::NodeId("n1");
  node.spec.gpu_model = "H100";
  node.spec.gpu_count = 8;
  node.state = core::NodeState::kUnhealthy;
  node.state_source = core::NodeStateSource::kNodeAgent;
  node.unhealthy_gpu_mask = (uint64_t{1} << 3) | (uint64_t{1} << 7);
  node.unhealthy_gpus_reason = "GPU 3: XID 79";
  pb::Node proto;
  ToProto(node, &proto);
  EXPECT_EQ(proto.state_source(), pb::NODE_STATE_SOURCE_NODE_AGENT);
  EXPECT_THAT(proto.unhealthy_gpus(), ::testing::ElementsAre(3, 7));
  auto back = NodeFromProto(proto, "node");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, node);
  // A node stored without a source is the operator's.
  proto.clear_state_source();
  EXPECT_EQ(NodeFromProto(proto, "node")->state_source,
            core::NodeStateSource::kOperator);
  proto.add_unhealthy_gpus(8);
  EXPECT_EQ(NodeFromProto(proto, "nodes[2]").status().message(),
            "nodes[2].unhealthy_gpus[2]: GPU 8 does not exist; the node has 8");
}

google::protobuf::Duration Dur(int64_t seconds, int32_t nanos) {
  google::protobuf::Duration d;
  d.set_seconds(seconds);
  d.set_nanos(nanos);
  return d;
}

google::protobuf::Timestamp Ts(int64_t seconds, int32_t nanos) {
  google::protobuf::Timestamp ts;
  ts.set_seconds(seconds);
  ts.set_nanos(nanos);
  return ts;
}

TEST(ConvertTest, DurationsInRangeAndNormalised) {
  constexpr int64_t kMax = 315'576'000'000;
  struct Case {
    google::protobuf::Duration d;
    std::string error;  // "" = accepted
  };
  const Case cases[] = {
      {Dur(1, 999'999'999), ""},
      {Dur(-1, -999'999'999), ""},
      {Dur(0, -5), ""},
      {Dur(kMax - 1, 0), ""},
      {Dur(kMax, 0), ""},
      {Dur(kMax + 1, 0),
       "d.seconds: must be in -315576000000..315576000000, not "
       "315576000001"},
      {Dur(-kMax - 1, 0),
       "d.seconds: must be in -315576000000..315576000000, not "
       "-315576000001"},
      {Dur(int64_t{1} << 62, 0),
       "d.seconds: must be in -315576000000..315576000000, not "
       "4611686018427387904"},
      {Dur(1, 1'000'000'000),
       "d.nanos: must be in -999999999..999999999, not 1000000000"},
      {Dur(1, -999'999'999),
       "d.nanos: must have the sign of seconds (1 s, -999999999 ns)"},
      {Dur(-1, 1), "d.nanos: must have the sign of seconds (-1 s, 1 ns)"},
  };
  for (const Case& c : cases) {
    auto result = DurationFromProto(c.d, "d");
    if (c.error.empty()) {
      ASSERT_TRUE(result.ok()) << c.d.ShortDebugString() << result.status();
      EXPECT_EQ(*result, FromProto(c.d));
    } else {
      EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(result.status().message(), c.error) << c.d.ShortDebugString();
    }
  }
}

TEST(ConvertTest, TimestampsInRange) {
  constexpr int64_t kMin = -62'135'596'800;
  constexpr int64_t kMax = 253'402'300'799;
  for (const auto& ts : {Ts(kMin, 0), Ts(kMin + 1, 0), Ts(kMax - 1, 0),
                         Ts(kMax, 999'999'999), Ts(0, 0)}) {
    auto result = TimestampFromProto(ts, "t");
    ASSERT_TRUE(result.ok()) << ts.ShortDebugString() << result.status();
    EXPECT_EQ(*result, FromProto(ts));
  }
  EXPECT_EQ(TimestampFromProto(Ts(kMax + 1, 0), "t").status().message(),
            "t.seconds: 253402300800 is outside years 1..9999 "
            "(-62135596800..253402300799)");
  EXPECT_EQ(TimestampFromProto(Ts(kMin - 1, 0), "t").status().message(),
            "t.seconds: -62135596801 is outside years 1..9999 "
            "(-62135596800..253402300799)");
  EXPECT_EQ(TimestampFromProto(Ts(int64_t{1} << 62, 0), "t").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TimestampFromProto(Ts(5, -1), "t").status().message(),
            "t.nanos: must be in 0..999999999, not -1");
  EXPECT_EQ(TimestampFromProto(Ts(5, 1'000'000'000), "t").status().message(),
            "t.nanos: must be in 0..999999999, not 1000000000");
}

TEST(ConvertTest, RequestDurationsAndTimestampsNameTheField) {
  pb::GangSpec spec;
  *spec.mutable_max_runtime() = Dur(1, -999'999'999);
  EXPECT_EQ(GangSpecFromProto(spec, "spec").status().message(),
            "spec.max_runtime.nanos: must have the sign of seconds (1 s, "
            "-999999999 ns)");
  spec.clear_max_runtime();
  *spec.mutable_estimated_runtime() = Dur(int64_t{1} << 62, 0);
  EXPECT_EQ(GangSpecFromProto(spec, "spec").status().message(),
            "spec.estimated_runtime.seconds: must be in "
            "-315576000000..315576000000, not 4611686018427387904");
  pb::Config config;
  *config.mutable_preemption()->mutable_grace_period() = Dur(-1, 5);
  EXPECT_EQ(ConfigFromProto(config, "config").status().message(),
            "config.preemption.grace_period.nanos: must have the sign of "
            "seconds (-1 s, 5 ns)");
  pb::Node node;
  *node.mutable_drain_deadline() = Ts(int64_t{-1} << 62, 0);
  EXPECT_EQ(NodeFromProto(node, "nodes[4]").status().message(),
            "nodes[4].drain_deadline.seconds: -4611686018427387904 is outside "
            "years 1..9999 (-62135596800..253402300799)");
}

TEST(ConvertTest, LimitsDefaultWhenUnsetAndRoundTrip) {
  pb::Config proto;
  auto defaults = ConfigFromProto(proto, "config");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->limits, core::LimitsConfig());
  EXPECT_EQ(defaults->limits.max_labels, 32);
  EXPECT_EQ(defaults->limits.max_label_key_bytes, 63);
  EXPECT_EQ(defaults->limits.max_label_value_bytes, 256);
  EXPECT_EQ(defaults->limits.max_id_bytes, 128);
  EXPECT_EQ(defaults->limits.max_message_bytes, 1024);
  EXPECT_EQ(defaults->limits.max_quota_gpus, int64_t{1} << 40);
  EXPECT_EQ(defaults->limits.max_pending_gangs_per_queue, 100000);
  EXPECT_EQ(defaults->limits.requests_per_second, 1000);
  EXPECT_EQ(defaults->limits.request_burst, 2000);
  EXPECT_EQ(defaults->limits.watch_streams_per_principal, 64);
  EXPECT_EQ(defaults->limits.watch_stream_buffer_bytes, 4 << 20);
  EXPECT_EQ(defaults->limits.watch_total_buffer_bytes, 256 << 20);

  core::Config config;
  core::LimitsConfig& l = config.limits;
  l.max_labels = 7;
  l.max_label_key_bytes = 8;
  l.max_label_value_bytes = 9;
  l.max_id_bytes = 40;
  l.max_message_bytes = 100;
  l.max_quota_gpus = 5000;
  l.max_pending_gangs_per_queue = 12;
  l.requests_per_second = 2.5;
  l.request_burst = 13;
  l.watch_streams_per_principal = 14;
  l.watch_stream_buffer_bytes = 1 << 20;
  l.watch_total_buffer_bytes = 2 << 20;
  pb::Config out;
  ToProto(config, &out);
  EXPECT_EQ(out.limits().max_id_bytes(), 40);
  EXPECT_EQ(out.limits().requests_per_second(), 2.5);
  auto back = ConfigFromProto(out, "config");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, config);
  // Negative values are kept for ValidateConfig to refuse by name.
  proto.mutable_limits()->set_max_labels(-1);
  EXPECT_EQ(ConfigFromProto(proto, "config")->limits.max_labels, -1);
}

}  // namespace
}  // namespace phalanx::convert
