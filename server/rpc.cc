#include "server/rpc.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "core/validate.h"
#include "server/status.h"

namespace phalanx::server {

grpc::ServerUnaryReactor* RunOnLoop(SchedulerLoop& loop,
                                    grpc::CallbackServerContext* context,
                                    LoopBody body, bool mutates,
                                    LoopRespond respond, LoopFill fill) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto status = std::make_shared<absl::Status>();
  const bool queued = loop.Enqueue(
      [body = std::move(body), status](core::Scheduler& s, absl::Time now) {
        *status = body(s, now);
      },
      [status, respond = std::move(respond)](const core::Scheduler& s) {
        if (status->ok() && respond) respond(s);
      },
      [reactor, status, fill = std::move(fill)] {
        if (status->ok() && fill) fill();
        reactor->Finish(ToGrpc(*status));
      },
      mutates);
  if (!queued) {
    reactor->Finish(
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
  reactor->Finish(ToGrpc(status));
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
