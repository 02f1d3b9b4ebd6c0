#include "server/fleet_service.h"

#include <bit>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/fleet_report.h"
#include "core/status_macros.h"
#include "core/validate.h"
#include "proto/convert.h"
#include "server/rpc.h"

namespace phalanx::server {

void NodeToProto(const core::Scheduler& scheduler, int index, v1::Node* out,
                 const GangFilter& show_gang) {
  const core::Fleet::Slot& slot = scheduler.fleet().slots()[index];
  convert::ToProto(slot.node, out);
  for (int gpu = 0; gpu < slot.node.spec.gpu_count; ++gpu) {
    if (slot.used_gpu_mask >> gpu & 1) out->add_used_gpu_indices(gpu);
  }
  for (const core::GangPtr& gang : scheduler.GangsOn(index)) {
    if (show_gang && !show_gang(*gang)) continue;
    out->add_gang_ids(gang->id.value());
  }
  // A follower's read-only scheduler has heard no heartbeat (InfinitePast).
  if (auto beat = scheduler.LastHeartbeat(slot.node.spec.id);
      beat && *beat != absl::InfinitePast()) {
    convert::ToProto(*beat, out->mutable_last_heartbeat());
  }
}

absl::Status CheckNodeAgentTransition(const Caller& caller,
                                      const core::Node& node,
                                      core::NodeState to) {
  using core::NodeState;
  if (caller.Has(auth::kAdmin)) return absl::OkStatus();
  const bool agents_own =
      node.state == NodeState::kUnhealthy &&
      node.state_source == core::NodeStateSource::kNodeAgent;
  if (to == NodeState::kUnhealthy && (node.state == NodeState::kReady ||
                                      node.state == NodeState::kUnhealthy)) {
    return absl::OkStatus();
  }
  if (to == NodeState::kReady && agents_own) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "principal ", core::QuoteForError(caller.name()), " (roles: ",
      caller.RoleNames(), ") may not set a ", core::NodeStateName(node.state),
      " node (set by ", core::NodeStateSourceName(node.state_source), ") ",
      core::NodeStateName(to),
      ": a node agent sets READY nodes UNHEALTHY, and nodes a node agent "
      "made UNHEALTHY READY, only; the rest needs ADMIN"));
}

bool KeepsAnothersUnhealthy(const Caller& caller, const core::Node& node,
                            core::NodeState to) {
  return !caller.Has(auth::kAdmin) && to == core::NodeState::kUnhealthy &&
         node.state == core::NodeState::kUnhealthy &&
         node.state_source != core::NodeStateSource::kNodeAgent;
}

namespace {

// What an audit record says of a health report.
std::string HealthSummary(const core::NodeHealthReport& report) {
  return absl::StrCat(report.healthy ? "healthy" : "unhealthy",
                      "; unhealthy GPUs [",
                      absl::StrJoin(report.unhealthy_gpus, ","), "]");
}

// Whom a state change by `caller` is recorded as coming from.
core::NodeStateSource SourceOf(const Caller& caller) {
  return caller.Has(auth::kAdmin) ? core::NodeStateSource::kOperator
                                  : core::NodeStateSource::kNodeAgent;
}

}  // namespace

grpc::ServerUnaryReactor* FleetService::UpsertNodes(
    grpc::CallbackServerContext* context, const v1::UpsertNodesRequest* request,
    v1::UpsertNodesResponse* response) {
  const std::string target =
      request->nodes_size() == 0 ? "" : request->nodes(0).id();
  auto caller = gate_->Admit(*context, rpc::kUpsertNodes, target);
  if (!caller.ok()) return FinishNow(context, caller.status());
  std::vector<core::Node> nodes;
  // Nodes sent without a state: an existing one keeps its own.
  std::vector<bool> keep_state;
  for (int i = 0; i < request->nodes_size(); ++i) {
    auto node = convert::NodeFromProto(request->nodes(i),
                                       absl::StrCat("nodes[", i, "]"));
    if (!node.ok()) return FinishNow(context, node.status());
    nodes.push_back(*std::move(node));
    keep_state.push_back(request->nodes(i).state() ==
                         v1::NODE_STATE_UNSPECIFIED);
  }
  const std::string summary = absl::StrCat(nodes.size(), " nodes");
  return RunOnLoop(
      *loop_, context,
      Audited(gate_, *caller, rpc::kUpsertNodes, target, summary,
              [nodes = std::move(nodes), keep_state = std::move(keep_state),
               response](core::Scheduler& s, absl::Time) -> absl::Status {
                std::vector<core::Node> upsert = nodes;
                for (size_t i = 0; i < upsert.size(); ++i) {
                  const int slot = s.fleet().Find(upsert[i].spec.id);
                  if (keep_state[i] && slot >= 0) {
                    upsert[i].state = s.fleet().slots()[slot].node.state;
                  }
                }
                ASSIGN_OR_RETURN(
                    std::vector<core::Node> stored,
                    s.UpsertNodes(std::move(upsert), absl::InfinitePast(),
                                  core::Scheduler::ExistingNodeState::kRefuse));
                for (const core::Node& node : stored) {
                  NodeToProto(s, s.fleet().Find(node.spec.id),
                              response->add_nodes());
                }
                return absl::OkStatus();
              }));
}

grpc::ServerUnaryReactor* FleetService::SetNodeState(
    grpc::CallbackServerContext* context,
    const v1::SetNodeStateRequest* request,
    v1::SetNodeStateResponse* response) {
  auto caller = gate_->Admit(*context, rpc::kSetNodeState, request->node_id());
  if (!caller.ok()) return FinishNow(context, caller.status());
  if (auto s = CheckId(*loop_, request->node_id(), "node_id"); !s.ok()) {
    return FinishNow(context, s);
  }
  auto state = convert::NodeStateFromProto(request->state(), "state");
  if (!state.ok()) return FinishNow(context, state.status());
  std::optional<absl::Time> drain_deadline;
  if (request->has_drain_deadline()) {
    auto deadline = convert::TimestampFromProto(request->drain_deadline(),
                                                "drain_deadline");
    if (!deadline.ok()) return FinishNow(context, deadline.status());
    drain_deadline = *deadline;
  }
  return RunOnLoop(
      *loop_, context,
      Audited(gate_, *caller, rpc::kSetNodeState, request->node_id(),
              core::NodeStateName(*state),
              [id = core::NodeId(request->node_id()), state = *state,
               reason = request->reason(), drain_deadline, response,
               caller = *caller, gate = gate_](core::Scheduler& s,
                                               absl::Time now) -> absl::Status {
                const int slot = s.fleet().Find(id);
                if (slot >= 0) {
                  absl::Status allowed = CheckNodeAgentTransition(
                      caller, s.fleet().slots()[slot].node, state);
                  if (!allowed.ok()) {
                    gate->CountDenied(rpc::kSetNodeState, "node_state");
                    return allowed;
                  }
                  if (KeepsAnothersUnhealthy(
                          caller, s.fleet().slots()[slot].node, state)) {
                    NodeToProto(s, slot, response->mutable_node());
                    return absl::OkStatus();
                  }
                }
                ASSIGN_OR_RETURN(
                    core::Node node,
                    s.SetNodeState(id, state, reason, now, drain_deadline,
                                   SourceOf(caller)));
                NodeToProto(s, s.fleet().Find(id), response->mutable_node());
                return absl::OkStatus();
              }));
}

grpc::ServerUnaryReactor* FleetService::RemoveNode(
    grpc::CallbackServerContext* context, const v1::RemoveNodeRequest* request,
    v1::RemoveNodeResponse*) {
  auto caller = gate_->Admit(*context, rpc::kRemoveNode, request->node_id());
  if (!caller.ok()) return FinishNow(context, caller.status());
  if (auto s = CheckId(*loop_, request->node_id(), "node_id"); !s.ok()) {
    return FinishNow(context, s);
  }
  return RunOnLoop(
      *loop_, context,
      Audited(
          gate_, *caller, rpc::kRemoveNode, request->node_id(), "remove",
          [id = core::NodeId(request->node_id())](
              core::Scheduler& s, absl::Time) { return s.RemoveNode(id); }));
}

grpc::ServerUnaryReactor* FleetService::Heartbeat(
    grpc::CallbackServerContext* context, const v1::HeartbeatRequest* request,
    v1::HeartbeatResponse*) {
  auto caller = gate_->Admit(*context, rpc::kHeartbeat);
  if (!caller.ok()) return FinishNow(context, caller.status());
  std::vector<core::NodeId> ids;
  for (int i = 0; i < request->node_ids_size(); ++i) {
    const std::string field = absl::StrCat("node_ids[", i, "]");
    if (auto s = CheckId(*loop_, request->node_ids(i), field); !s.ok()) {
      return FinishNow(context, s);
    }
    ids.emplace_back(request->node_ids(i));
  }
  return RunOnLoop(
      *loop_, context,
      [ids = std::move(ids)](core::Scheduler& s, absl::Time now) {
        return s.Heartbeat(ids, now);
      },
      /*mutates=*/false);
}

grpc::ServerUnaryReactor* FleetService::ReportNodeHealth(
    grpc::CallbackServerContext* context,
    const v1::ReportNodeHealthRequest* request,
    v1::ReportNodeHealthResponse* response) {
  auto caller =
      gate_->Admit(*context, rpc::kReportNodeHealth, request->node_id());
  if (!caller.ok()) return FinishNow(context, caller.status());
  if (auto s = CheckId(*loop_, request->node_id(), "node_id"); !s.ok()) {
    return FinishNow(context, s);
  }
  core::NodeHealthReport report;
  report.node_id = core::NodeId(request->node_id());
  report.healthy = request->healthy();
  report.unhealthy_gpus.assign(request->unhealthy_gpus().begin(),
                               request->unhealthy_gpus().end());
  report.reason = request->reason();
  // Repeated reports are periodic, as heartbeats are: only one that changes
  // the node (or fails) leaves an audit record.
  return RunOnLoop(
      *loop_, context,
      [report = std::move(report), response, caller = *caller, gate = gate_](
          core::Scheduler& s, absl::Time now) -> absl::Status {
        const int slot = s.fleet().Find(report.node_id);
        const std::optional<core::Node> before =
            slot < 0 ? std::nullopt
                     : std::optional(s.fleet().slots()[slot].node);
        absl::StatusOr<core::Node> after = s.ReportNodeHealth(report, now);
        if (!after.ok() || *after != *before) {
          gate->Audit(caller, rpc::kReportNodeHealth, report.node_id.value(),
                      after.status(), HealthSummary(report));
        }
        if (!after.ok()) return after.status();
        NodeToProto(s, s.fleet().Find(report.node_id),
                    response->mutable_node());
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* FleetService::ListNodes(
    grpc::CallbackServerContext* context, const v1::ListNodesRequest* request,
    v1::ListNodesResponse* response) {
  auto caller = gate_->Admit(*context, rpc::kListNodes);
  if (!caller.ok()) return FinishNow(context, caller.status());
  GangFilter show_gang;
  if (caller->ScopedTo(Access::kGangRead)) {
    show_gang = [caller = *caller,
                 parents = loop_->view()->queue_parents](const core::Gang& g) {
      return caller.AllowsQueue(Access::kGangRead, g.spec.queue.value(),
                                *parents);
    };
  }
  std::optional<core::NodeState> state;
  if (request->state() != v1::NODE_STATE_UNSPECIFIED) {
    auto parsed = convert::NodeStateFromProto(request->state(), "state");
    if (!parsed.ok()) return FinishNow(context, parsed.status());
    state = *parsed;
  }
  return RunOnLoop(
      *loop_, context,
      [state, model = request->gpu_model(), response,
       show_gang = std::move(show_gang)](core::Scheduler& s, absl::Time) {
        const std::vector<core::Fleet::Slot>& slots = s.fleet().slots();
        for (size_t i = 0; i < slots.size(); ++i) {
          const core::Node& node = slots[i].node;
          if (state && node.state != *state) continue;
          if (!model.empty() && node.spec.gpu_model != model) continue;
          NodeToProto(s, static_cast<int>(i), response->add_nodes(), show_gang);
        }
        response->set_revision(s.revision());
        return absl::OkStatus();
      },
      /*mutates=*/false);
}

grpc::ServerUnaryReactor* FleetService::GetTopology(
    grpc::CallbackServerContext* context, const v1::GetTopologyRequest*,
    v1::GetTopologyResponse* response) {
  auto caller = gate_->Admit(*context, rpc::kGetTopology);
  if (!caller.ok()) return FinishNow(context, caller.status());
  return RunOnLoop(
      *loop_, context,
      [response](core::Scheduler& s, absl::Time) {
        const core::FleetReport report = core::DescribeFleet(s.fleet());
        for (const std::string& level : s.fleet().levels()) {
          response->add_levels(level);
        }
        for (const core::DomainReport& d : report.domains) {
          v1::Domain* out = response->add_domains();
          out->set_path(d.path);
          out->set_level(d.level);
          out->set_nodes(d.nodes);
          out->set_gpus_total(d.gpus_total);
          out->set_gpus_free(d.gpus_free);
          out->set_free_whole_nodes(d.free_whole_nodes);
        }
        response->set_node_fragmentation(report.node_fragmentation);
        for (const core::LevelFragmentation& l : report.levels) {
          v1::LevelFragmentation* out = response->add_levels_fragmentation();
          out->set_level(l.level);
          out->set_largest_free_whole_nodes(l.largest_free_whole_nodes);
          out->set_stranded_whole_node_fraction(l.stranded_whole_node_fraction);
        }
        response->set_revision(s.revision());
        return absl::OkStatus();
      },
      /*mutates=*/false);
}

}  // namespace phalanx::server
