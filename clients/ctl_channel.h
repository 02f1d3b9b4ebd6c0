// The connection of phalanxctl to the daemon: a gRPC channel built from
// ConnectionOptions (plain text, TLS or mutual TLS; a receive limit), and
// the metadata every call carries (the bearer token). Connection is a value
// type, immutable once opened, safe to use from several threads.
#ifndef PHALANX_CLIENTS_CTL_CHANNEL_H_
#define PHALANX_CLIENTS_CTL_CHANNEL_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clients/ctl_args.h"
#include "grpcpp/grpcpp.h"

namespace phalanx::ctl {

// The largest token file and PEM file read; a larger file is an error (a
// path such as /dev/zero cannot make the client read forever).
inline constexpr size_t kMaxTokenFileBytes = 64 << 10;
inline constexpr size_t kMaxPemFileBytes = 1 << 20;

// Returns the metadata of every call: {"authorization", "Bearer TOKEN"}
// when `token` is set, nothing when it is empty.
std::vector<std::pair<std::string, std::string>> CallMetadata(
    absl::string_view token);

// Returns the token in the file at `path`, one trailing "\n" or "\r\n"
// dropped. Fails with InvalidArgument naming the file, never quoting its
// contents, when it cannot be read, is larger than kMaxTokenFileBytes, or
// does not hold a valid token (see CheckToken).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// The channel and the per-call metadata of one phalanxctl run.
class Connection {
 public:
  // Reads the files `options` names (token, CA, client certificate and key)
  // and creates the channel: TLS when tls_ca_file is set (verifying the
  // server against those roots, checking tls_server_name when set, with the
  // client certificate when set), else plain text; replies larger than
  // max_message_bytes fail with RESOURCE_EXHAUSTED. Fails with
  // InvalidArgument naming the flag and file when a file cannot be read or
  // the token in it is invalid. Does not connect: the first call does.
  static absl::StatusOr<Connection> Open(const ConnectionOptions& options);

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  // Whether calls carry a bearer token.
  bool has_token() const { return !metadata_.empty(); }
  // Adds the call metadata to `context`; call before starting the call.
  void Prepare(grpc::ClientContext* context) const;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_CHANNEL_H_
