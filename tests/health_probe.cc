#include "tests/health_probe.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "storage/sync/handoff.h"
#include "storage/sync/mutex.h"

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
  Notification done;
  grpc::Status status;
  // gRPC runs the callback on its own thread after UnaryCall started the
  // call (ordered inside libgrpc): storage/sync/handoff.h.
  HandoffRelease(&done);
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                 &request, &response, [&](grpc::Status s) {
                   HandoffAcquire(&done);
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
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
