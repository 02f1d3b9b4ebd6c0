// grpc.health.v1.Health/Check without the health proto's generated code (a
// hand-encoded request and reply), for the integration tests and the HA
// bench. No GoogleTest: the bench links it too.
#ifndef PHALANX_TESTS_HEALTH_PROBE_H_
#define PHALANX_TESTS_HEALTH_PROBE_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace phalanx::testing {

// The status of `service` on `channel`: 1 = SERVING, 2 = NOT_SERVING, 0 for
// a reply it cannot read, -code on an RPC error; waits at most `timeout`.
int HealthStatus(const std::shared_ptr<grpc::Channel>& channel,
                 const std::string& service,
                 absl::Duration timeout = absl::Seconds(10));

}  // namespace phalanx::testing

#endif  // PHALANX_TESTS_HEALTH_PROBE_H_
