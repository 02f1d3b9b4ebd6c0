#include "proto/auth_config.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/validate.h"
#include "google/protobuf/util/json_util.h"
#include "proto/convert.h"

namespace phalanx::auth {
namespace {

constexpr size_t kMaxPrincipalNameBytes = 128;
constexpr size_t kMaxSubjectBytes = 256;

absl::Status Bad(const std::string& field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

absl::Status CheckPrintable(absl::string_view text, size_t max_bytes,
                            const std::string& field) {
  if (text.empty()) return Bad(field, "must not be empty");
  if (text.size() > max_bytes) {
    return Bad(field, absl::StrCat("must be at most ", max_bytes, " bytes"));
  }
  for (unsigned char c : text) {
    if (c < 0x20 || c >= 0x7f) {
      return Bad(field, absl::StrCat(core::QuoteForError(text),
                                     " must be printable ASCII"));
    }
  }
  return absl::OkStatus();
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

absl::StatusOr<Sha256> ParseSha256(absl::string_view hex,
                                   const std::string& field) {
  Sha256 out{};
  if (hex.size() != 2 * out.size()) {
    return Bad(field, "must be 64 lower-case hex digits (SHA-256)");
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const int high = HexDigit(hex[2 * i]);
    const int low = HexDigit(hex[2 * i + 1]);
    if (high < 0 || low < 0) {
      return Bad(field, "must be 64 lower-case hex digits (SHA-256)");
    }
    out[i] = static_cast<uint8_t>(high << 4 | low);
  }
  return out;
}

absl::StatusOr<uint32_t> RolesFromProto(const v1::Principal& in,
                                        const std::string& field) {
  uint32_t roles = 0;
  for (int i = 0; i < in.roles_size(); ++i) {
    switch (in.roles(i)) {
      case v1::ROLE_ADMIN:
        roles |= kAdmin;
        break;
      case v1::ROLE_TENANT:
        roles |= kTenant;
        break;
      case v1::ROLE_VIEWER:
        roles |= kViewer;
        break;
      case v1::ROLE_NODE_AGENT:
        roles |= kNodeAgent;
        break;
      default:
        return Bad(absl::StrCat(field, ".roles[", i, "]"),
                   absl::StrCat("unknown role ", in.roles(i)));
    }
  }
  if (roles == 0) return Bad(field + ".roles", "must name at least one role");
  return roles;
}

absl::Status LimitsFromProto(const v1::Principal& in, const std::string& field,
                             Principal& out) {
  if (in.has_requests_per_second()) {
    if (!(in.requests_per_second() > 0 && in.requests_per_second() <= 1e9)) {
      return Bad(field + ".requests_per_second", "must be in (0, 1e9]");
    }
    out.requests_per_second = in.requests_per_second();
  }
  if (in.has_request_burst()) {
    if (in.request_burst() < 1 || in.request_burst() > 1'000'000'000) {
      return Bad(field + ".request_burst", "must be in [1, 1e9]");
    }
    out.request_burst = in.request_burst();
  }
  if (in.has_watch_streams()) {
    if (in.watch_streams() < 0 || in.watch_streams() > 100'000) {
      return Bad(field + ".watch_streams", "must be in [0, 100000]");
    }
    out.watch_streams = in.watch_streams();
  }
  return absl::OkStatus();
}

absl::StatusOr<Principal> PrincipalFromProto(const v1::Principal& in,
                                             const std::string& field) {
  Principal out;
  RETURN_IF_ERROR(
      CheckPrintable(in.name(), kMaxPrincipalNameBytes, field + ".name"));
  out.name = in.name();
  if (!in.token_sha256().empty()) {
    ASSIGN_OR_RETURN(out.token_sha256,
                     ParseSha256(in.token_sha256(), field + ".token_sha256"));
  }
  if (!in.tls_subject().empty()) {
    RETURN_IF_ERROR(CheckPrintable(in.tls_subject(), kMaxSubjectBytes,
                                   field + ".tls_subject"));
    out.tls_subject = in.tls_subject();
  }
  if (!out.token_sha256 && out.tls_subject.empty()) {
    return Bad(field, "needs token_sha256 or tls_subject");
  }
  ASSIGN_OR_RETURN(out.roles, RolesFromProto(in, field));
  for (int i = 0; i < in.queues_size(); ++i) {
    RETURN_IF_ERROR(core::ValidateQueueName(
        in.queues(i), absl::StrCat(field, ".queues[", i, "]")));
    out.queues.push_back(in.queues(i));
  }
  std::sort(out.queues.begin(), out.queues.end());
  if (out.Has(kTenant) && out.queues.empty()) {
    return Bad(field + ".queues", "ROLE_TENANT needs at least one queue");
  }
  if (in.has_expires_at()) {
    ASSIGN_OR_RETURN(
        out.expires_at,
        convert::TimestampFromProto(in.expires_at(), field + ".expires_at"));
  }
  RETURN_IF_ERROR(LimitsFromProto(in, field, out));
  return out;
}

}  // namespace

absl::StatusOr<AuthPolicy> AuthPolicyFromProto(const v1::AuthConfig& config) {
  AuthPolicy policy;
  std::set<std::string> names, subjects;
  std::set<Sha256> tokens;
  for (int i = 0; i < config.principals_size(); ++i) {
    const std::string field = absl::StrCat("principals[", i, "]");
    ASSIGN_OR_RETURN(Principal p,
                     PrincipalFromProto(config.principals(i), field));
    if (!names.insert(p.name).second) {
      return Bad(field + ".name", "duplicate principal name");
    }
    if (p.token_sha256 && !tokens.insert(*p.token_sha256).second) {
      return Bad(field + ".token_sha256", "another principal has this token");
    }
    if (!p.tls_subject.empty() && !subjects.insert(p.tls_subject).second) {
      return Bad(field + ".tls_subject", "another principal has this subject");
    }
    policy.principals.push_back(std::move(p));
  }
  return policy;
}

absl::StatusOr<AuthPolicy> ParseAuthConfigJson(absl::string_view json) {
  v1::AuthConfig config;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &config,
      options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an AuthConfig: ", status.message().ToString()));
  }
  return AuthPolicyFromProto(config);
}

}  // namespace phalanx::auth
