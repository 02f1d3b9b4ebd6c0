// TLS for the gRPC listener (docs/security.md): server credentials from PEM
// files that gRPC's file-watcher provider re-reads when they change, so a
// rotated certificate is served without a restart. Stateless functions;
// thread-safe.
#ifndef PHALANX_SERVER_TLS_H_
#define PHALANX_SERVER_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"

namespace phalanx::server {

struct TlsFiles {
  std::string cert;       // PEM certificate chain
  std::string key;        // PEM private key
  std::string client_ca;  // PEM roots; non-empty = require client certs
  absl::Duration reload_interval = absl::Seconds(10);
};

// Credentials serving `files`. InvalidArgument naming the flag when a file
// cannot be read or is not PEM (checked once here; later changes are picked
// up by the watcher, which keeps the old pair if a new one is broken).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsCredentials(
    const TlsFiles& files);

// The notAfter time of the first certificate in the PEM file at `path`.
absl::StatusOr<absl::Time> CertificateNotAfter(const std::string& path);

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_TLS_H_
