// Glue between unary callback handlers and the scheduler loop. Stateless;
// thread-safe.
#ifndef PHALANX_SERVER_RPC_H_
#define PHALANX_SERVER_RPC_H_

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "core/scheduler.h"
#include "grpcpp/grpcpp.h"
#include "server/gate.h"
#include "server/scheduler_loop.h"

namespace phalanx::server {

// A handler body run on the loop thread; it fills the response and returns
// the call's status.
using LoopBody =
    std::function<absl::Status(core::Scheduler& scheduler, absl::Time now)>;

// Fills the response from the state after the batch (its admission cycle
// included), on the loop thread.
using LoopRespond = std::function<void(const core::Scheduler& scheduler)>;

// Fills the response on the loop's reply thread, just before the call is
// answered, from what a LoopRespond captured: it must not touch the
// scheduler (immutable GangPtrs and copied values only).
using LoopFill = std::function<void()>;

// Runs `body` on the loop and finishes the call once the batch is durable
// (UNAVAILABLE when the loop is stopping, and while the loop's writes are
// refused, naming the cause — except a read, when the loop serves reads
// from the last durable state meanwhile). When `body` succeeded, `respond`
// (if set) runs after the batch's cycle, seeing its admissions, and `fill`
// (if set) runs off the loop before the answer. `mutates` = false for reads.
// `keep_alive` (if set) lives until the call is answered: what `respond`
// and `fill` point to without owning it (so their captures stay small
// enough for std::function to hold without allocating).
grpc::ServerUnaryReactor* RunOnLoop(
    SchedulerLoop& loop, grpc::CallbackServerContext* context, LoopBody body,
    bool mutates = true, LoopRespond respond = nullptr, LoopFill fill = nullptr,
    std::shared_ptr<const void> keep_alive = nullptr);

// `body`, followed by an audit record of its outcome for `caller`.
LoopBody Audited(Gate* gate, const Caller& caller, const RpcMethod& method,
                 std::string target, std::string summary, LoopBody body);

// Finishes the call at once with `status`.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status);

// InvalidArgument "<field>: must not be empty" when `value` is empty.
absl::Status RequireNonEmpty(const std::string& value, const char* field);

// Checks an id a request names (gang_id, node_id), before anything else is
// done with it: InvalidArgument naming `field` when it is empty, longer than
// the configuration's limits.max_id_bytes or not printable ASCII.
absl::Status CheckId(const SchedulerLoop& loop, absl::string_view id,
                     absl::string_view field);

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_RPC_H_
