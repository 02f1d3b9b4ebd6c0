#include "clients/ctl_channel.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "clients/ctl_format.h"
#include "storage/sync/mutex.h"

namespace phalanx::ctl {
namespace {

// The contents of `path`, at most `max_bytes`. `flag` names the flag in
// errors; the contents never appear in them.
absl::StatusOr<std::string> ReadSmallFile(absl::string_view flag,
                                          const std::string& path,
                                          size_t max_bytes) {
  std::ifstream file(path, std::ios::binary);
  if (!file.is_open()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": cannot read ", SafeText(path), ": ", std::strerror(errno)));
  }
  std::string text(max_bytes + 1, '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (file.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot read ", SafeText(path)));
  }
  text.resize(static_cast<size_t>(file.gcount()));
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": ", SafeText(path), " is larger than ", max_bytes, " bytes"));
  }
  return text;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> CallMetadata(
    absl::string_view token) {
  if (token.empty()) return {};
  return {{"authorization", absl::StrCat("Bearer ", token)}};
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text =
      ReadSmallFile("--token-file", path, kMaxTokenFileBytes);
  if (!text.ok()) return text.status();
  absl::string_view token = *text;
  if (absl::ConsumeSuffix(&token, "\n")) absl::ConsumeSuffix(&token, "\r");
  if (absl::Status status =
          CheckToken(token, absl::StrCat("--token-file ", SafeText(path)));
      !status.ok()) {
    return status;
  }
  return std::string(token);
}

absl::StatusOr<Connection> Connection::Open(const ConnectionOptions& options) {
  Connection connection;
  std::string token = options.token;
  if (!options.token_file.empty()) {
    absl::StatusOr<std::string> from_file = ReadTokenFile(options.token_file);
    if (!from_file.ok()) return from_file.status();
    token = *std::move(from_file);
  }
  connection.metadata_ = CallMetadata(token);

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.tls_ca_file.empty()) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    absl::StatusOr<std::string> roots =
        ReadSmallFile("--tls-ca", options.tls_ca_file, kMaxPemFileBytes);
    if (!roots.ok()) return roots.status();
    ssl.pem_root_certs = *std::move(roots);
    if (!options.tls_cert_file.empty()) {
      absl::StatusOr<std::string> cert =
          ReadSmallFile("--tls-cert", options.tls_cert_file, kMaxPemFileBytes);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key =
          ReadSmallFile("--tls-key", options.tls_key_file, kMaxPemFileBytes);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    if (!options.tls_server_name.empty()) {
      // Sets GRPC_SSL_TARGET_NAME_OVERRIDE_ARG.
      args.SetSslTargetNameOverride(options.tls_server_name);
    }
    credentials = grpc::SslCredentials(ssl);
  }
  connection.endpoints_ = std::make_shared<Endpoints>();
  Endpoints& e = *connection.endpoints_;
  e.credentials = credentials;
  e.args = args;
  e.loopback_only = connection.has_token() && options.tls_ca_file.empty() &&
                    !options.insecure;
  MutexLock lock(&e.mu);
  for (const std::string& address : SplitEndpoints(options.server)) {
    e.list.emplace_back(address,
                        grpc::CreateCustomChannel(address, credentials, args));
  }
  return connection;
}

std::shared_ptr<grpc::Channel> Connection::channel() const {
  MutexLock lock(&endpoints_->mu);
  return endpoints_->list[endpoints_->current].second;
}

size_t Connection::endpoints() const {
  MutexLock lock(&endpoints_->mu);
  return endpoints_->list.size();
}

std::shared_ptr<grpc::Channel> Connection::AfterUnavailable(
    const std::multimap<grpc::string_ref, grpc::string_ref>& trailers,
    bool safe_to_resend) const {
  Endpoints& e = *endpoints_;
  MutexLock lock(&e.mu);
  auto hint = trailers.find("phalanx-leader");
  if (hint != trailers.end() && hint->second.size() > 0 &&
      hint->second.size() <= 256) {
    const std::string leader(hint->second.data(), hint->second.size());
    for (size_t i = 0; i < e.list.size(); ++i) {
      if (e.list[i].first == leader) {
        if (i == e.current) return nullptr;  // the leader itself refused
        e.current = i;
        return e.list[i].second;
      }
    }
    // A token in plain text goes to loopback only (as --server checks).
    if (e.loopback_only && !IsLoopbackTarget(leader)) return nullptr;
    if (e.list.size() >= kMaxEndpoints) return nullptr;
    e.list.emplace_back(
        leader, grpc::CreateCustomChannel(leader, e.credentials, e.args));
    e.current = e.list.size() - 1;
    return e.list.back().second;
  }
  if (!safe_to_resend || e.list.size() < 2) return nullptr;
  e.current = (e.current + 1) % e.list.size();
  return e.list[e.current].second;
}

void Connection::Prepare(grpc::ClientContext* context) const {
  for (const auto& [key, value] : metadata_) context->AddMetadata(key, value);
}

}  // namespace phalanx::ctl
