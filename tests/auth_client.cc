#include "tests/auth_client.h"

#include <openssl/sha.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace phalanx::testing {
namespace {

std::string Quoted(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) out.push_back("\"" + item + "\"");
  return absl::StrJoin(out, ",");
}

void Run(const std::string& command) {
  const int status = std::system((command + " 2>/dev/null").c_str());
  ASSERT_EQ(status, 0) << command;
}

}  // namespace

std::string Sha256Hex(const std::string& text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
         digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char byte : digest) {
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 15]);
  }
  return out;
}

std::string PrincipalJson(const std::string& name, const std::string& token,
                          const std::vector<std::string>& roles,
                          const std::vector<std::string>& queues,
                          const std::string& extra) {
  std::string json =
      absl::StrCat(R"({"name":")", name, R"(",)", R"("tokenSha256":")",
                   Sha256Hex(token), R"(","roles":[)", Quoted(roles), "]");
  if (!queues.empty())
    absl::StrAppend(&json, R"(,"queues":[)", Quoted(queues), "]");
  if (!extra.empty()) absl::StrAppend(&json, ",", extra);
  return json + "}";
}

std::string AuthJson(const std::vector<std::string>& principals) {
  return absl::StrCat(R"({"principals":[)", absl::StrJoin(principals, ","),
                      "]}");
}

std::unique_ptr<grpc::ClientContext> WithToken(const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(10));
  return context;
}

TestPki::TestPki(std::string dir) : dir_(std::move(dir)) {}

void TestPki::MakeCa(const std::string& name) {
  Run(absl::StrCat(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256"
      " -nodes -days 30 -subj /CN=",
      name, " -keyout ", Path(name + ".key"), " -out ", Path(name + ".crt")));
}

void TestPki::MakeCert(const std::string& name, const std::string& cn,
                       const std::string& ca, int days) {
  const std::string ext = Path(name + ".ext");
  std::ofstream(ext) << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
  Run(absl::StrCat(
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
      "-nodes -subj /CN=",
      cn, " -keyout ", Path(name + ".key"), " -out ", Path(name + ".csr")));
  // -days -1 ends the validity a day before it starts: expired.
  Run(absl::StrCat("openssl x509 -req -in ", Path(name + ".csr"), " -CA ",
                   Path(ca + ".crt"), " -CAkey ", Path(ca + ".key"),
                   " -CAcreateserial -extfile ", ext, " -days ", days, " -out ",
                   Path(name + ".crt")));
}

std::string TestPki::Read(const std::string& file) const {
  std::ifstream in(Path(file));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::shared_ptr<grpc::Channel> TlsChannel(const std::string& address,
                                          const std::string& ca_pem,
                                          const std::string& cert_pem,
                                          const std::string& key_pem) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ca_pem;
  options.pem_cert_chain = cert_pem;
  options.pem_private_key = key_pem;
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  // A fresh connection per channel, so rotated certificates are seen.
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(options),
                                   args);
}

}  // namespace phalanx::testing
