// FleetService: the phalanx.v1.Fleet gRPC service. Every call runs on the
// scheduler loop (node usage is the writer's state). Holds no domain state;
// thread-safe.
#ifndef PHALANX_SERVER_FLEET_SERVICE_H_
#define PHALANX_SERVER_FLEET_SERVICE_H_

#include "phalanx/v1/fleet.grpc.pb.h"
#include "server/gate.h"
#include "server/scheduler_loop.h"

namespace phalanx::server {

class FleetService final : public v1::Fleet::CallbackService {
 public:
  FleetService(SchedulerLoop* loop, Gate* gate) : loop_(loop), gate_(gate) {}

  grpc::ServerUnaryReactor* UpsertNodes(
      grpc::CallbackServerContext* context,
      const v1::UpsertNodesRequest* request,
      v1::UpsertNodesResponse* response) override;
  grpc::ServerUnaryReactor* SetNodeState(
      grpc::CallbackServerContext* context,
      const v1::SetNodeStateRequest* request,
      v1::SetNodeStateResponse* response) override;
  grpc::ServerUnaryReactor* RemoveNode(
      grpc::CallbackServerContext* context,
      const v1::RemoveNodeRequest* request,
      v1::RemoveNodeResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* ReportNodeHealth(
      grpc::CallbackServerContext* context,
      const v1::ReportNodeHealthRequest* request,
      v1::ReportNodeHealthResponse* response) override;
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* context,
                                      const v1::ListNodesRequest* request,
                                      v1::ListNodesResponse* response) override;
  grpc::ServerUnaryReactor* GetTopology(
      grpc::CallbackServerContext* context,
      const v1::GetTopologyRequest* request,
      v1::GetTopologyResponse* response) override;

 private:
  SchedulerLoop* loop_;
  Gate* gate_;
};

// Whether a gang's id may be shown to the caller (ListNodes hides the ids
// of gangs in queues a tenant may not see); null = all.
using GangFilter = std::function<bool(const core::Gang& gang)>;

// Fills `out` with the node in fleet slot `index` and its usage (its gangs
// by id).
void NodeToProto(const core::Scheduler& scheduler, int index, v1::Node* out,
                 const GangFilter& show_gang = nullptr);

// OK when `caller` may move `node` to `to`: an ADMIN anything; a caller
// with only ROLE_NODE_AGENT a READY or UNHEALTHY node UNHEALTHY, and a node
// a node agent made UNHEALTHY (state_source NODE_AGENT) READY, so an agent
// never undoes a cordon, a drain or another's UNHEALTHY. PermissionDenied
// else.
absl::Status CheckNodeAgentTransition(const Caller& caller,
                                      const core::Node& node,
                                      core::NodeState to);

// Whether a node agent's UNHEALTHY of `node` leaves it as it is: the node
// is already UNHEALTHY by an operator or a heartbeat timeout, who keeps it
// (and its reason), so the agent cannot later return it to READY.
bool KeepsAnothersUnhealthy(const Caller& caller, const core::Node& node,
                            core::NodeState to);

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_FLEET_SERVICE_H_
