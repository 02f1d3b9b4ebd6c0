// Unary gRPC calls with raw bytes, completed on the calling thread, and
// grpc.health.v1.Health/Check built on them (without the health proto's
// generated code: a hand-encoded request and reply), for the integration
// tests and the HA bench. Thread-safe (each call is its own). No
// GoogleTest: the bench links it too.
#ifndef PHALANX_TESTS_HEALTH_PROBE_H_
#define PHALANX_TESTS_HEALTH_PROBE_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace phalanx::testing {

// What a unary call returned.
struct UnaryReply {
  grpc::Status status;
  // The serialized reply; empty unless `status` is OK.
  std::string bytes;
};

// Calls `method` ("/package.Service/Method") on `channel` with the
// serialized request `request_bytes`, waiting at most `timeout`. The call
// completes on the calling thread, through a completion queue drained here
// (no callback API), so gRPC's writes into the call's context and status are
// not handed between threads ThreadSanitizer cannot see. A call that never
// completes reads UNKNOWN.
UnaryReply UnaryBytesCall(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& method,
                          const std::string& request_bytes,
                          absl::Duration timeout);

// The status of `service` on `channel`: 1 = SERVING, 2 = NOT_SERVING, 0 for
// a reply it cannot read, -code on an RPC error; waits at most `timeout`.
int HealthStatus(const std::shared_ptr<grpc::Channel>& channel,
                 const std::string& service,
                 absl::Duration timeout = absl::Seconds(10));

}  // namespace phalanx::testing

#endif  // PHALANX_TESTS_HEALTH_PROBE_H_
