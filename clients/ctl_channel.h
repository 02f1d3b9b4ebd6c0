// The connection of phalanxctl to the daemon: gRPC channels built from
// ConnectionOptions (plain text, TLS or mutual TLS; a receive limit), and
// the metadata every call carries (the bearer token). --server may name
// several endpoints ("a:1,b:2,c:3", the replicas of an HA cluster:
// docs/ha.md); calls go to one, and move when a follower names the leader
// or an endpoint is unreachable (AfterUnavailable). Copies share the
// channels; safe to use from several threads.
#ifndef PHALANX_CLIENTS_CTL_CHANNEL_H_
#define PHALANX_CLIENTS_CTL_CHANNEL_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clients/ctl_args.h"
#include "grpcpp/grpcpp.h"
#include "phalanx/v1/admin.grpc.pb.h"
#include "phalanx/v1/fleet.grpc.pb.h"
#include "phalanx/v1/scheduler.grpc.pb.h"
#include "storage/sync/mutex.h"

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

  // The channel calls go to now.
  std::shared_ptr<grpc::Channel> channel() const;
  // After a call on channel() failed with UNAVAILABLE and these trailing
  // metadata: the channel to send it to next, or null to give up. A
  // `phalanx-leader: ADDRESS` hint (an HA follower's answer to a call it
  // does not serve, refused before anything was done) is always followed;
  // otherwise, when the call is `safe_to_resend`, the next endpoint of
  // --server is tried. The choice sticks for later calls.
  std::shared_ptr<grpc::Channel> AfterUnavailable(
      const std::multimap<grpc::string_ref, grpc::string_ref>& trailers,
      bool safe_to_resend) const;
  // How many endpoints are known (given, and learnt from leader hints).
  size_t endpoints() const;
  // Whether calls carry a bearer token.
  bool has_token() const { return !metadata_.empty(); }
  // Adds the call metadata to `context`; call before starting the call.
  void Prepare(grpc::ClientContext* context) const;

 private:
  struct Endpoints {
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    grpc::ChannelArguments args;
    Mutex mu;
    bool loopback_only = false;  // hints off loopback are not followed
    // (address, channel); at most kMaxEndpoints.
    std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>> list
        ABSL_GUARDED_BY(mu);
    size_t current ABSL_GUARDED_BY(mu) = 0;
  };
  static constexpr size_t kMaxEndpoints = 64;
  std::shared_ptr<Endpoints> endpoints_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

// Whether a call may be sent again after a plain UNAVAILABLE, which may
// have come after the server acted on it: reads, and writes whose repeat
// changes nothing (a submit with a request_id returns the same gang; a
// cancel of a cancelled gang returns it; a lease renewal only moves the
// expiry; a heartbeat or a node health report says the same again; a
// report of a state or checkpoint is a no-op when repeated — an
// acknowledgement of a preemption is not).
template <typename Request>
bool SafeToResend(const Request&) {
  return std::is_same_v<Request, v1::GetGangRequest> ||
         std::is_same_v<Request, v1::ListGangsRequest> ||
         std::is_same_v<Request, v1::ExplainGangRequest> ||
         std::is_same_v<Request, v1::DryRunGangRequest> ||
         std::is_same_v<Request, v1::CancelGangRequest> ||
         std::is_same_v<Request, v1::RenewGangLeaseRequest> ||
         std::is_same_v<Request, v1::ListNodesRequest> ||
         std::is_same_v<Request, v1::GetTopologyRequest> ||
         std::is_same_v<Request, v1::GetConfigRequest> ||
         std::is_same_v<Request, v1::ListQueuesRequest> ||
         std::is_same_v<Request, v1::ListAuditRecordsRequest> ||
         std::is_same_v<Request, v1::HeartbeatRequest> ||
         std::is_same_v<Request, v1::ReportNodeHealthRequest>;
}
inline bool SafeToResend(const v1::SubmitGangRequest& request) {
  return !request.spec().request_id().empty();
}
inline bool SafeToResend(const v1::ReportGangRequest& request) {
  return !request.preemption_acknowledged();
}

// Hops one call may make between endpoints (leader hints and fail-over).
inline constexpr int kMaxHops = 4;

// Makes a unary call on connection.channel(), `prepare` giving each
// attempt's context its metadata and deadline. On UNAVAILABLE it follows an
// HA follower's leader hint, or tries the next --server endpoint when the
// call is safe to resend (Connection::AfterUnavailable), at most kMaxHops
// times; returns the last status.
template <typename Stub, typename Request, typename Response>
grpc::Status CallFollowingLeader(
    const Connection& connection,
    const std::function<void(grpc::ClientContext*)>& prepare,
    grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                 Response*),
    const Request& request, Response* response) {
  std::shared_ptr<grpc::Channel> channel = connection.channel();
  for (int hop = 0;; ++hop) {
    Stub stub(channel);
    grpc::ClientContext context;
    prepare(&context);
    grpc::Status status = (stub.*method)(&context, request, response);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE ||
        hop >= kMaxHops) {
      return status;
    }
    channel = connection.AfterUnavailable(context.GetServerTrailingMetadata(),
                                          SafeToResend(request));
    if (channel == nullptr) return status;
  }
}

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_CHANNEL_H_
