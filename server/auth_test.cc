#include "server/auth.h"

#include "gtest/gtest.h"
#include "server/fleet_service.h"
#include "server/gate.h"

namespace phalanx::server {
namespace {

Caller Make(uint32_t roles, std::vector<std::string> queues = {}) {
  auto p = std::make_shared<auth::Principal>();
  p->name = "p";
  p->roles = roles;
  p->queues = std::move(queues);
  return Caller(std::move(p));
}

// team -> {a -> {a1}, b}; other at the top.
QueueParents Tree() {
  return {
      {"team", ""}, {"a", "team"}, {"a1", "a"}, {"b", "team"}, {"other", ""}};
}

TEST(CallerTest, RolesAllowTheTableOfAccess) {
  struct Case {
    uint32_t roles;
    Access access;
    bool allowed;
  };
  const Case cases[] = {
      {auth::kAdmin, Access::kAdmin, true},
      {auth::kTenant, Access::kAdmin, false},
      {auth::kTenant, Access::kGangWrite, true},
      {auth::kTenant, Access::kFleetWrite, false},
      {auth::kTenant, Access::kClusterRead, true},
      {auth::kViewer, Access::kGangRead, true},
      {auth::kViewer, Access::kGangWrite, false},
      {auth::kViewer, Access::kHeartbeat, false},
      {auth::kNodeAgent, Access::kHeartbeat, true},
      {auth::kNodeAgent, Access::kNodeState, true},
      {auth::kNodeAgent, Access::kGangRead, false},
      {auth::kNodeAgent, Access::kFleetWrite, false},
      {auth::kNodeAgent, Access::kClusterRead, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Make(c.roles).Allows(c.access), c.allowed)
        << c.roles << " " << static_cast<int>(c.access);
  }
  EXPECT_TRUE(Caller::Anonymous().Allows(Access::kAdmin));
}

TEST(CallerTest, TenantsReachTheirQueuesAndEveryQueueBelow) {
  const QueueParents tree = Tree();
  const Caller tenant = Make(auth::kTenant, {"a"});
  EXPECT_TRUE(tenant.AllowsQueue(Access::kGangWrite, "a", tree));
  EXPECT_TRUE(tenant.AllowsQueue(Access::kGangWrite, "a1", tree));
  EXPECT_FALSE(tenant.AllowsQueue(Access::kGangWrite, "b", tree));
  EXPECT_FALSE(tenant.AllowsQueue(Access::kGangWrite, "team", tree));
  EXPECT_FALSE(tenant.AllowsQueue(Access::kGangRead, "other", tree));
  EXPECT_FALSE(tenant.AllowsQueue(Access::kGangWrite, "unknown", tree));
  // A viewer-tenant reads everything but writes only its own queues.
  const Caller both = Make(auth::kTenant | auth::kViewer, {"a"});
  EXPECT_TRUE(both.AllowsQueue(Access::kGangRead, "other", tree));
  EXPECT_FALSE(both.AllowsQueue(Access::kGangWrite, "other", tree));
}

TEST(CallerTest, AQueueLoopEndsTheSearch) {
  const QueueParents loop = {{"x", "y"}, {"y", "x"}};
  EXPECT_FALSE(
      Make(auth::kTenant, {"a"}).AllowsQueue(Access::kGangRead, "x", loop));
}

core::Node NodeIn(core::NodeState state, core::NodeStateSource source) {
  core::Node node;
  node.state = state;
  node.state_source = source;
  return node;
}

TEST(NodeAgentTest, UnhealthyFromReadyAndBackOnlyFromItsOwn) {
  using core::NodeState;
  using Source = core::NodeStateSource;
  const Caller agent = Make(auth::kNodeAgent);
  const core::Node ready = NodeIn(NodeState::kReady, Source::kOperator);
  const core::Node own = NodeIn(NodeState::kUnhealthy, Source::kNodeAgent);
  EXPECT_TRUE(
      CheckNodeAgentTransition(agent, ready, NodeState::kUnhealthy).ok());
  EXPECT_TRUE(CheckNodeAgentTransition(agent, own, NodeState::kReady).ok());
  EXPECT_TRUE(CheckNodeAgentTransition(agent, own, NodeState::kUnhealthy).ok());
  EXPECT_FALSE(KeepsAnothersUnhealthy(agent, own, NodeState::kUnhealthy));
  // An operator's or the heartbeat timeout's UNHEALTHY: never READY; an
  // UNHEALTHY again is allowed but leaves the node as it is.
  for (const core::Node& node :
       {NodeIn(NodeState::kUnhealthy, Source::kOperator),
        NodeIn(NodeState::kUnhealthy, Source::kHeartbeatTimeout)}) {
    EXPECT_EQ(CheckNodeAgentTransition(agent, node, NodeState::kReady).code(),
              absl::StatusCode::kPermissionDenied);
    EXPECT_TRUE(
        CheckNodeAgentTransition(agent, node, NodeState::kUnhealthy).ok());
    EXPECT_TRUE(KeepsAnothersUnhealthy(agent, node, NodeState::kUnhealthy));
    EXPECT_FALSE(KeepsAnothersUnhealthy(Make(auth::kAdmin), node,
                                        NodeState::kUnhealthy));
  }
  // A cordon, a drain.
  for (const core::Node& node :
       {NodeIn(NodeState::kCordoned, Source::kOperator),
        NodeIn(NodeState::kDraining, Source::kOperator)}) {
    EXPECT_EQ(CheckNodeAgentTransition(agent, node, NodeState::kReady).code(),
              absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(
        CheckNodeAgentTransition(agent, node, NodeState::kUnhealthy).code(),
        absl::StatusCode::kPermissionDenied);
  }
  EXPECT_EQ(CheckNodeAgentTransition(agent, ready, NodeState::kCordoned).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(
      CheckNodeAgentTransition(Make(auth::kAdmin),
                               NodeIn(NodeState::kCordoned, Source::kOperator),
                               NodeState::kReady)
          .ok());
}

TEST(RateLimiterTest, BurstThenRefill) {
  RateLimiter limiter;
  limiter.SetDefaults(10, 3);
  const Caller caller = Make(auth::kTenant, {"a"});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_TRUE(limiter.Allow(caller, t0));
  EXPECT_TRUE(limiter.Allow(caller, t0));
  EXPECT_TRUE(limiter.Allow(caller, t0));
  EXPECT_FALSE(limiter.Allow(caller, t0));
  EXPECT_FALSE(limiter.Allow(caller, t0 + absl::Milliseconds(50)));
  EXPECT_TRUE(limiter.Allow(caller, t0 + absl::Milliseconds(150)));
  // Development mode has no per-principal limit.
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(limiter.Allow(Caller::Anonymous(), t0));
  }
}

TEST(Sha256Test, KnownDigest) {
  EXPECT_EQ(HexOf(Sha256Of("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(GateTest, UnknownMethodsAreUnknown) {
  EXPECT_TRUE(IsKnownMethod("/phalanx.v1.Admin/PutQueue"));
  EXPECT_TRUE(IsKnownMethod("/grpc.health.v1.Health/Check"));
  EXPECT_FALSE(IsKnownMethod("/phalanx.v1.Admin/Nope"));
  EXPECT_FALSE(IsKnownMethod("/x"));
}

}  // namespace
}  // namespace phalanx::server
