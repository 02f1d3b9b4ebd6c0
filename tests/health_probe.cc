#include "tests/health_probe.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"

namespace phalanx::testing {
namespace {

// The bytes of `buffer`, in one string.
std::string Bytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  (void)buffer.Dump(&slices);
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

}  // namespace

UnaryReply UnaryBytesCall(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& method,
                          const std::string& request_bytes,
                          absl::Duration timeout) {
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue queue;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&context, method, request, &queue);
  UnaryReply reply;
  call->StartCall();
  call->Finish(&response, &reply.status, call.get());
  void* tag = nullptr;
  bool ok = false;
  // The deadline bounds this wait: gRPC completes the call by then.
  const bool finished = queue.Next(&tag, &ok);
  queue.Shutdown();
  for (void* rest = nullptr; queue.Next(&rest, &ok);) {
  }
  if (!finished || tag != call.get()) {
    return {.status = grpc::Status(grpc::StatusCode::UNKNOWN,
                                   "the call did not complete"),
            .bytes = ""};
  }
  if (reply.status.ok()) reply.bytes = Bytes(response);
  return reply;
}

int HealthStatus(const std::shared_ptr<grpc::Channel>& channel,
                 const std::string& service, absl::Duration timeout) {
  std::string request = "\x0a";
  request.push_back(static_cast<char>(service.size()));
  request += service;
  const UnaryReply reply =
      UnaryBytesCall(channel, "/grpc.health.v1.Health/Check", request, timeout);
  if (!reply.status.ok()) return -static_cast<int>(reply.status.error_code());
  const std::string& bytes = reply.bytes;
  return bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : 0;
}

}  // namespace phalanx::testing
