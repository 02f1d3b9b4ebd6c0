// The --auth file: proto3 JSON of phalanx.v1.AuthConfig, parsed and checked
// into the principals the server authenticates against (docs/security.md).
// Pure parsing (protobuf and core only, so it can be fuzzed alone).
// Stateless functions; thread-safe.
#ifndef PHALANX_PROTO_AUTH_CONFIG_H_
#define PHALANX_PROTO_AUTH_CONFIG_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "phalanx/v1/auth.pb.h"

namespace phalanx::auth {

// Role bits of a principal.
enum RoleBit : uint32_t {
  kAdmin = 1,
  kTenant = 2,
  kViewer = 4,
  kNodeAgent = 8,
};

using Sha256 = std::array<uint8_t, 32>;

struct Principal {
  std::string name;
  std::optional<Sha256> token_sha256;
  std::string tls_subject;          // empty = not by certificate
  uint32_t roles = 0;               // RoleBit set
  std::vector<std::string> queues;  // ROLE_TENANT scope, sorted
  std::optional<absl::Time> expires_at;
  std::optional<double> requests_per_second;
  std::optional<int64_t> request_burst;
  std::optional<int> watch_streams;

  bool Has(RoleBit role) const { return (roles & role) != 0; }
};

struct AuthPolicy {
  std::vector<Principal> principals;  // in file order
};

// Parses the JSON text of an AuthConfig and checks it: every principal has
// a unique printable name (1-128 bytes), a token hash (64 lower-case hex
// digits) and/or a TLS subject, each unique, at least one known role, and,
// for ROLE_TENANT, at least one valid queue name. InvalidArgument names the
// field ("principals[2].token_sha256: …").
absl::StatusOr<AuthPolicy> ParseAuthConfigJson(absl::string_view json);
absl::StatusOr<AuthPolicy> AuthPolicyFromProto(const v1::AuthConfig& config);

}  // namespace phalanx::auth

#endif  // PHALANX_PROTO_AUTH_CONFIG_H_
