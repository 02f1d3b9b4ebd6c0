// The one mapping from absl::Status to grpc::Status. Stateless; thread-safe.
#ifndef PHALANX_SERVER_STATUS_H_
#define PHALANX_SERVER_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"

namespace phalanx::server {

// Same code (the enums agree numerically), same message.
inline grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_STATUS_H_
