#include "server/auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/validate.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {
namespace {

constexpr absl::string_view kBearer = "Bearer ";
// Deeper queue trees than this are not searched (a loop guard).
constexpr int kMaxQueueDepth = 64;

absl::Status Unauthenticated(absl::string_view why) {
  return absl::UnauthenticatedError(why);
}

absl::Status CheckNotExpired(const auth::Principal& p, absl::Time now) {
  if (p.expires_at && now >= *p.expires_at) {
    return Unauthenticated(
        absl::StrCat("principal ", core::QuoteForError(p.name), " expired at ",
                     absl::FormatTime(absl::RFC3339_sec, *p.expires_at,
                                      absl::UTCTimeZone())));
  }
  return absl::OkStatus();
}

}  // namespace

Caller Caller::Anonymous() { return Caller(nullptr); }

const std::string& Caller::name() const {
  static const std::string* const kAnonymous = new std::string();
  return principal_ ? principal_->name : *kAnonymous;
}

bool Caller::Has(auth::RoleBit role) const {
  return principal_ == nullptr || principal_->Has(role);
}

bool Caller::Allows(Access access) const {
  using auth::kAdmin, auth::kNodeAgent, auth::kTenant, auth::kViewer;
  if (Has(kAdmin)) return true;
  switch (access) {
    case Access::kGangWrite:
      return Has(kTenant);
    case Access::kGangRead:
      return Has(kTenant) || Has(kViewer);
    case Access::kNodeState:
    case Access::kHeartbeat:
      return Has(kNodeAgent);
    case Access::kClusterRead:
      return true;
    case Access::kFleetWrite:
    case Access::kAdmin:
      return false;
  }
  return false;
}

bool Caller::ScopedTo(Access access) const {
  if (Has(auth::kAdmin)) return false;
  if (access == Access::kGangRead && Has(auth::kViewer)) return false;
  return true;
}

bool Caller::AllowsQueue(Access access, const std::string& queue,
                         const QueueParents& parents) const {
  if (!Allows(access)) return false;
  if (!ScopedTo(access)) return true;
  return Has(auth::kTenant) && InScope(queue, parents);
}

bool Caller::InScope(const std::string& queue,
                     const QueueParents& parents) const {
  const std::vector<std::string>& mine = principal_->queues;
  std::string current = queue;
  for (int depth = 0; depth < kMaxQueueDepth && !current.empty(); ++depth) {
    if (std::binary_search(mine.begin(), mine.end(), current)) return true;
    auto it = parents.find(current);
    if (it == parents.end()) return false;
    current = it->second;
  }
  return false;
}

std::string Caller::RoleNames() const {
  std::vector<std::string> names;
  if (Has(auth::kAdmin)) names.push_back("ADMIN");
  if (principal_ == nullptr) return "ADMIN";
  if (Has(auth::kTenant)) names.push_back("TENANT");
  if (Has(auth::kViewer)) names.push_back("VIEWER");
  if (Has(auth::kNodeAgent)) names.push_back("NODE_AGENT");
  return absl::StrJoin(names, ",");
}

Authenticator::Authenticator(auth::AuthPolicy policy) : enabled_(true) {
  Replace(std::move(policy));
}

void Authenticator::Replace(auth::AuthPolicy policy) {
  auto principals = std::make_shared<Principals>();
  for (auth::Principal& p : policy.principals) {
    principals->push_back(
        std::make_shared<const auth::Principal>(std::move(p)));
  }
  MutexLock lock(&mu_);
  principals_ = std::move(principals);
}

std::shared_ptr<const Authenticator::Principals> Authenticator::principals()
    const {
  MutexLock lock(&mu_);
  return principals_;
}

absl::StatusOr<Caller> Authenticator::Authenticate(
    const grpc::ServerContextBase& context, absl::Time now) const {
  if (!enabled_) return Caller::Anonymous();
  const auto& metadata = context.client_metadata();
  const auto [first, last] = metadata.equal_range("authorization");
  if (first != last) {
    if (std::next(first) != last) {
      return Unauthenticated("more than one authorization header");
    }
    return ByToken(
        absl::string_view(first->second.data(), first->second.size()), now);
  }
  return ByCertificate(context, now);
}

absl::StatusOr<Caller> Authenticator::ByToken(absl::string_view header,
                                              absl::Time now) const {
  if (!absl::StartsWith(header, kBearer) || header.size() == kBearer.size()) {
    return Unauthenticated("authorization: expected \"Bearer TOKEN\"");
  }
  const auth::Sha256 digest = Sha256Of(header.substr(kBearer.size()));
  // Every principal is compared, in constant time each, so the time taken
  // says nothing about which hash (if any) matched.
  std::shared_ptr<const auth::Principal> match;
  for (const auto& p : *principals()) {
    if (p->token_sha256 && CRYPTO_memcmp(p->token_sha256->data(), digest.data(),
                                         digest.size()) == 0) {
      match = p;
    }
  }
  if (match == nullptr) return Unauthenticated("unknown bearer token");
  if (auto s = CheckNotExpired(*match, now); !s.ok()) return s;
  return Caller(std::move(match));
}

absl::StatusOr<Caller> Authenticator::ByCertificate(
    const grpc::ServerContextBase& context, absl::Time now) const {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) {
    return Unauthenticated(
        "no credentials: send \"authorization: Bearer TOKEN\" or a client "
        "certificate");
  }
  const std::vector<grpc::string_ref> names =
      auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
  if (names.size() != 1) {
    return Unauthenticated("client certificate has no single subject CN");
  }
  const absl::string_view subject(names[0].data(), names[0].size());
  for (const auto& p : *principals()) {
    if (!p->tls_subject.empty() && p->tls_subject == subject) {
      if (auto s = CheckNotExpired(*p, now); !s.ok()) return s;
      return Caller(p);
    }
  }
  return Unauthenticated(absl::StrCat("no principal for certificate subject ",
                                      core::QuoteForError(subject)));
}

auth::Sha256 Sha256Of(absl::string_view text) {
  auth::Sha256 digest;
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
         digest.data());
  return digest;
}

std::string HexOf(const auth::Sha256& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t byte : digest) {
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 15]);
  }
  return out;
}

}  // namespace phalanx::server
