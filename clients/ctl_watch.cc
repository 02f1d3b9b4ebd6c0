#include "clients/ctl_watch.h"

#include <memory>

namespace phalanx::ctl {
namespace {

// One stream of either RPC; `*read_any` says whether a message came.
template <typename Message, typename Start>
grpc::Status ReadStream(const Start& start,
                        const std::function<bool(grpc::ClientContext*)>& attach,
                        const std::function<void(const Message&)>& on_message,
                        bool* read_any) {
  grpc::ClientContext context;
  if (!attach(&context)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "stopped");
  }
  std::unique_ptr<grpc::ClientReader<Message>> reader = start(&context);
  Message message;
  while (reader->Read(&message)) {
    *read_any = true;
    on_message(message);
  }
  grpc::Status status = reader->Finish();
  attach(nullptr);
  return status;
}

}  // namespace

grpc::Status ReadWatchStream(
    v1::Scheduler::Stub& stub, const v1::WatchGangsRequest& request,
    const std::function<bool(grpc::ClientContext*)>& attach,
    const std::function<void(const v1::GangEvent&)>& on_event, bool& batches) {
  if (batches) {
    bool read_any = false;
    grpc::Status status = ReadStream<v1::GangEventBatch>(
        [&](grpc::ClientContext* context) {
          return stub.WatchGangBatches(context, request);
        },
        attach,
        [&](const v1::GangEventBatch& batch) {
          for (const v1::GangEvent& event : batch.events()) on_event(event);
        },
        &read_any);
    if (status.error_code() != grpc::StatusCode::UNIMPLEMENTED || read_any) {
      return status;
    }
    batches = false;
  }
  bool read_any = false;
  return ReadStream<v1::GangEvent>(
      [&](grpc::ClientContext* context) {
        return stub.WatchGangs(context, request);
      },
      attach, on_event, &read_any);
}

}  // namespace phalanx::ctl
