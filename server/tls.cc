#include "server/tls.h"

#include <openssl/asn1.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace phalanx::server {
namespace {

// Reads the first PEM object of `path` with `read`; null when there is none.
template <typename T, typename Read>
std::unique_ptr<T, void (*)(T*)> ReadPem(const std::string& path, Read read,
                                         void (*free)(T*)) {
  std::unique_ptr<T, void (*)(T*)> none(nullptr, free);
  FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) return none;
  T* object = read(file, nullptr, nullptr, nullptr);
  std::fclose(file);
  return std::unique_ptr<T, void (*)(T*)>(object, free);
}

absl::Status CheckPem(const std::string& path, const char* flag, bool key) {
  const bool ok =
      key ? ReadPem<EVP_PKEY>(path, PEM_read_PrivateKey, EVP_PKEY_free) !=
                nullptr
          : ReadPem<X509>(path, PEM_read_X509, X509_free) != nullptr;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": cannot read a PEM ",
                   key ? "private key" : "certificate", " from ", path));
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsCredentials(
    const TlsFiles& files) {
  if (files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (auto s = CheckPem(files.cert, "--tls-cert", false); !s.ok()) return s;
  if (auto s = CheckPem(files.key, "--tls-key", true); !s.ok()) return s;
  if (!files.client_ca.empty()) {
    if (auto s = CheckPem(files.client_ca, "--tls-client-ca", false); !s.ok()) {
      return s;
    }
  }
  const auto interval = static_cast<unsigned int>(
      std::max<int64_t>(1, absl::ToInt64Seconds(files.reload_interval)));
  auto provider =
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          files.key, files.cert, files.client_ca, interval);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (files.client_ca.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

absl::StatusOr<absl::Time> CertificateNotAfter(const std::string& path) {
  auto cert = ReadPem<X509>(path, PEM_read_X509, X509_free);
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read a PEM certificate from ", path));
  }
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &tm) != 1) {
    return absl::InvalidArgumentError("certificate has no valid notAfter");
  }
  return absl::FromTM(tm, absl::UTCTimeZone());
}

}  // namespace phalanx::server
