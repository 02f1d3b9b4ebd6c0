// Reading a watch stream for phalanxctl's `watch` and `run`.
#ifndef PHALANX_CLIENTS_CTL_WATCH_H_
#define PHALANX_CLIENTS_CTL_WATCH_H_

#include <functional>

#include "grpcpp/grpcpp.h"
#include "phalanx/v1/scheduler.grpc.pb.h"

namespace phalanx::ctl {

// Reads one watch stream of `request` to its end and hands each event to
// `on_event`, in order. Uses WatchGangBatches (several events per message,
// docs/watch.md) while `batches` is true; when the daemon answers
// UNIMPLEMENTED before sending anything (a daemon older than that RPC), sets
// `batches` to false and reads WatchGangs instead, as later calls then do.
// `attach` is called with each stream's context before the call (add
// metadata there, and keep the pointer to cancel it; return false to start
// nothing: the result is then CANCELLED) and with nullptr once the stream
// has ended, before the context goes away. Returns the stream's status.
// Blocking; thread-compatible.
grpc::Status ReadWatchStream(
    v1::Scheduler::Stub& stub, const v1::WatchGangsRequest& request,
    const std::function<bool(grpc::ClientContext*)>& attach,
    const std::function<void(const v1::GangEvent&)>& on_event, bool& batches);

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_WATCH_H_
