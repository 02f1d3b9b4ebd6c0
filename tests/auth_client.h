// What the security suites share: tokens and their hashes, an --auth file,
// per-call credentials, and test certificates made with the openssl tool.
// Not thread-safe.
#ifndef PHALANX_TESTS_AUTH_CLIENT_H_
#define PHALANX_TESTS_AUTH_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"

namespace phalanx::testing {

// Lower-case hex SHA-256 of `text` (what an --auth file holds for a token).
std::string Sha256Hex(const std::string& text);

// A principal of an --auth file, as JSON. `extra` is appended inside the
// object (for example R"("expiresAt": "2020-01-01T00:00:00Z")").
std::string PrincipalJson(const std::string& name, const std::string& token,
                          const std::vector<std::string>& roles,
                          const std::vector<std::string>& queues = {},
                          const std::string& extra = "");
// {"principals": [...]} of the given principal objects.
std::string AuthJson(const std::vector<std::string>& principals);

// A client context that sends `token` as a bearer token ("" = none), with
// a 10 s deadline.
std::unique_ptr<grpc::ClientContext> WithToken(const std::string& token);

// Certificates made in a directory with the openssl tool (EC P-256).
class TestPki {
 public:
  explicit TestPki(std::string dir);
  // A self-signed CA named `name`: files NAME.crt, NAME.key.
  void MakeCa(const std::string& name);
  // A certificate `name` for CN=`cn` signed by `ca`, valid for `days`
  // (-1 = already expired), with SANs 127.0.0.1 and localhost.
  void MakeCert(const std::string& name, const std::string& cn,
                const std::string& ca, int days = 30);
  std::string Path(const std::string& file) const { return dir_ + "/" + file; }
  std::string Read(const std::string& file) const;

 private:
  std::string dir_;
};

// A TLS channel to `address` trusting `ca_pem`, with an optional client
// certificate (empty = none).
std::shared_ptr<grpc::Channel> TlsChannel(const std::string& address,
                                          const std::string& ca_pem,
                                          const std::string& cert_pem = "",
                                          const std::string& key_pem = "");

}  // namespace phalanx::testing

#endif  // PHALANX_TESTS_AUTH_CLIENT_H_
