#include "tests/health_probe.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"

namespace phalanx::testing {

int HealthStatus(const std::shared_ptr<grpc::Channel>& channel,
                 const std::string& service, absl::Duration timeout) {
  std::string request_bytes = "\x0a";
  request_bytes.push_back(static_cast<char>(service.size()));
  request_bytes += service;
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::GenericStub stub(channel);
  // The call completes on this thread (the completion queue is drained
  // here), so gRPC's writes into `context` and `status` need no handoff
  // between threads that TSan cannot see.
  grpc::CompletionQueue queue;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", request,
                            &queue);
  grpc::Status status;
  call->StartCall();
  call->Finish(&response, &status, call.get());
  void* tag = nullptr;
  bool ok = false;
  const bool finished = queue.Next(&tag, &ok);
  queue.Shutdown();
  for (void* rest = nullptr; queue.Next(&rest, &ok);) {
  }
  if (!finished || tag != call.get()) {
    return -static_cast<int>(grpc::StatusCode::UNKNOWN);
  }
  if (!status.ok()) return -static_cast<int>(status.error_code());
  std::vector<grpc::Slice> slices;
  (void)response.Dump(&slices);
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : 0;
}

}  // namespace phalanx::testing
