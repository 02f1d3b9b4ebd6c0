#include "bench/perf/bench_auth.h"

#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "phalanx/v1/auth.pb.h"
#include "server/auth.h"

namespace phalanx::perf {

absl::StatusOr<BenchAuth> WriteBenchAuth(const std::string& dir) {
  std::string random(24, '\0');
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(random.data(), static_cast<std::streamsize>(random.size())))
    return absl::InternalError("cannot read /dev/urandom");
  BenchAuth out{dir + "/auth.json", absl::BytesToHexString(random)};
  v1::AuthConfig config;
  v1::Principal* p = config.add_principals();
  p->set_name("bench-launcher");
  p->set_token_sha256(server::HexOf(server::Sha256Of(out.token)));
  p->add_roles(v1::ROLE_TENANT);
  p->add_queues("org");  // the cohort: every team queue below it
  p->set_requests_per_second(1e9);
  p->set_request_burst(1'000'000'000);
  p->set_watch_streams(100'000);
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(config, &json).ok()) {
    return absl::InternalError("cannot encode the auth file");
  }
  std::ofstream file(out.path);
  file << json;
  if (!file)
    return absl::InternalError(absl::StrCat("cannot write ", out.path));
  return out;
}

}  // namespace phalanx::perf
