// auth_json_fuzzer: the daemon's --auth file. The input is the file's text,
// parsed and checked exactly as phalanxd does at start and on SIGHUP
// (proto/auth_config.h). A file that is accepted must describe principals
// the server can use: unique names and credentials, at least one role and
// one credential each, tenants with queues, and the same answer when parsed
// again.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "core/check.h"
#include "proto/auth_config.h"

namespace phalanx::fuzz {
namespace {

void CheckPolicy(const auth::AuthPolicy& policy) {
  std::set<std::string> names;
  std::set<auth::Sha256> tokens;
  for (const auth::Principal& p : policy.principals) {
    PHALANX_CHECK(!p.name.empty() && p.name.size() <= 128);
    PHALANX_CHECK(names.insert(p.name).second);
    PHALANX_CHECK(p.token_sha256.has_value() || !p.tls_subject.empty());
    if (p.token_sha256) PHALANX_CHECK(tokens.insert(*p.token_sha256).second);
    PHALANX_CHECK(p.roles != 0);
    PHALANX_CHECK(!p.Has(auth::kTenant) || !p.queues.empty());
  }
}

}  // namespace
}  // namespace phalanx::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace phalanx;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto policy = auth::ParseAuthConfigJson(text);
  auto again = auth::ParseAuthConfigJson(text);
  PHALANX_CHECK(policy.ok() == again.ok());
  if (!policy.ok()) return 0;
  fuzz::CheckPolicy(*policy);
  PHALANX_CHECK(policy->principals.size() == again->principals.size());
  return 0;
}
