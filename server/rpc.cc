#include "server/rpc.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "core/validate.h"
#include "server/status.h"
#include "storage/sync/handoff.h"

namespace phalanx::server {

namespace {

// Finishes the call of `context`, whose reactor is `reactor`, with `status`.
// gRPC then frees the call's messages (ArenaAllocator's Holder::Release) on
// one of its threads once the call is done, ordered inside libgrpc: what
// this thread wrote into the response happens before it (storage/sync/
// handoff.h).
void FinishCall(grpc::CallbackServerContext* context,
                grpc::ServerUnaryReactor* reactor, const grpc::Status& status) {
  if (const void* messages = context->GetRpcAllocatorState()) {
    HandoffRelease(messages);
  }
  reactor->Finish(status);
}

// One call's state across its three loop callbacks, allocated once: each
// callback captures only its address, which std::function holds inline
// (a trivially copyable capture of at most two pointers), so queueing a
// call allocates nothing more. The reply runs last and exactly once
// (SchedulerLoop::Enqueue's contract) and frees it.
struct LoopCall {
  LoopBody body;
  LoopRespond respond;
  LoopFill fill;
  std::shared_ptr<const void> keep_alive;
  grpc::CallbackServerContext* context;
  grpc::ServerUnaryReactor* reactor;
  absl::Status status;
};

}  // namespace

grpc::ServerUnaryReactor* RunOnLoop(SchedulerLoop& loop,
                                    grpc::CallbackServerContext* context,
                                    LoopBody body, bool mutates,
                                    LoopRespond respond, LoopFill fill,
                                    std::shared_ptr<const void> keep_alive) {
  // Writes refused (a full disk, an etcd over its quota): a write fails
  // fast, the caller retries later. A read is served from the last durable
  // state when the loop can (it must not see the batch awaiting its
  // commit), else refused too.
  if (absl::Status refused = loop.WritesRefused();
      !refused.ok() && (mutates || !loop.ServesReadsWhileRefused())) {
    if (mutates) return FinishNow(context, refused);
    return FinishNow(context,
                     absl::UnavailableError(absl::StrCat(
                         refused.message(),
                         "; until then GetGang, ListGangs and the watches are "
                         "served")));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto* call = new LoopCall{std::move(body), std::move(respond),
                            std::move(fill), std::move(keep_alive),
                            context,         reactor,
                            absl::OkStatus()};
  const bool queued = loop.Enqueue(
      [call](core::Scheduler& s, absl::Time now) {
        call->status = call->body(s, now);
      },
      [call](const core::Scheduler& s) {
        if (call->status.ok() && call->respond) call->respond(s);
      },
      [call](const absl::Status& committed) {
        std::unique_ptr<LoopCall> owned(call);
        if (!committed.ok()) owned->status = committed;
        if (owned->status.ok() && owned->fill) owned->fill();
        FinishCall(owned->context, owned->reactor, ToGrpc(owned->status));
      },
      mutates);
  if (!queued) {
    delete call;
    FinishCall(
        context, reactor,
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
  }
  return reactor;
}

LoopBody Audited(Gate* gate, const Caller& caller, const RpcMethod& method,
                 std::string target, std::string summary, LoopBody body) {
  return [gate, caller, &method, target = std::move(target),
          summary = std::move(summary),
          body = std::move(body)](core::Scheduler& s, absl::Time now) {
    absl::Status status = body(s, now);
    gate->Audit(caller, method, target, status, summary);
    return status;
  };
}

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  FinishCall(context, reactor, ToGrpc(status));
  return reactor;
}

absl::Status CheckId(const SchedulerLoop& loop, absl::string_view id,
                     absl::string_view field) {
  return core::ValidateId(id, loop.view()->limits, field);
}

absl::Status RequireNonEmpty(const std::string& value, const char* field) {
  if (!value.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": must not be empty"));
}

}  // namespace phalanx::server
