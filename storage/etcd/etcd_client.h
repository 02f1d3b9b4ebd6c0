// EtcdClient: a small client of etcd's v3 gRPC API (docs/ha.md) — KV Range,
// Put, Txn and DeleteRange; Lease Grant, KeepAlive and Revoke; Watch. Every
// unary call's attempt has a deadline (Options::call_timeout), and a call
// may carry an overall one. The client holds one channel per endpoint and
// sends to the current one; an attempt that fails with UNAVAILABLE or
// DEADLINE_EXCEEDED moves it to the next endpoint (round robin) and is
// retried there, at most once per endpoint in a call. Every call requires
// a member with a leader, so a member cut off from the others refuses at
// once (and so do all of them during an etcd election: callers that must
// ride one out retry). A retried mutation may apply twice: callers make
// their writes idempotent (compares in a Txn).
//
// With Options::user set, the client authenticates (Auth.Authenticate) and
// sends the token with every call, re-authenticating once when etcd says the
// token is no longer valid. With Options::tls set, it speaks TLS (and mTLS
// when a client certificate is given).
//
// Thread-safe: any method may be called from any thread.
#ifndef PHALANX_STORAGE_ETCD_ETCD_CLIENT_H_
#define PHALANX_STORAGE_ETCD_ETCD_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "storage/sync/mutex.h"

namespace phalanx::storage::etcd {

namespace epb = ::etcdserverpb;

struct TlsFiles {
  std::string ca_file;    // PEM roots that sign etcd's certificate
  std::string cert_file;  // optional client certificate (mTLS)
  std::string key_file;   // its key
};

struct EtcdClientOptions {
  // "http://host:port", "https://host:port" or "host:port".
  std::vector<std::string> endpoints;
  // Each attempt's deadline (one endpoint). Well below the HA lease TTL, so
  // a hung member costs a fraction of the lease before the next is tried.
  absl::Duration call_timeout = absl::Seconds(1);
  // HTTP/2 keepalive pings while calls or streams are open. etcd refuses
  // pings more often than its --grpc-keepalive-min-time (5 s by default).
  absl::Duration keepalive_time = absl::Seconds(6);
  absl::Duration keepalive_timeout = absl::Seconds(2);
  // Set to speak TLS to every endpoint.
  bool tls = false;
  TlsFiles tls_files;
  // Set to authenticate as this etcd user.
  std::string user;
  std::string password;
};

// One Watch stream, created by EtcdClient::Watch. Read blocks; Cancel may be
// called from another thread to end a blocked Read. Not thread-safe
// otherwise.
class WatchStream {
 public:
  ~WatchStream();
  // The next response carrying events (progress-only responses are
  // skipped). Fails with Cancelled after Cancel, OutOfRange when the start
  // revision was compacted, or the stream's error; FailedPrecondition once
  // the stream has ended.
  absl::StatusOr<epb::WatchResponse> Read();
  // Ends the stream; a blocked Read returns.
  void Cancel();

 private:
  friend class EtcdClient;
  WatchStream() = default;
  grpc::ClientContext context_;
  std::unique_ptr<epb::Watch::Stub> stub_;
  std::unique_ptr<
      grpc::ClientReaderWriter<epb::WatchRequest, epb::WatchResponse>>
      stream_;
};

class EtcdClient {
 public:
  // Builds the channels; connects lazily. Fails with InvalidArgument for an
  // empty or malformed endpoint list, NotFound for unreadable TLS files.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(
      EtcdClientOptions options);

  // Each call below fails with DeadlineExceeded (or the last attempt's
  // error) once `deadline` has passed; InfiniteFuture = the attempts'
  // deadlines only.
  absl::StatusOr<epb::RangeResponse> Range(
      const epb::RangeRequest& request,
      absl::Time deadline = absl::InfiniteFuture());
  absl::StatusOr<epb::PutResponse> Put(const epb::PutRequest& request);
  absl::StatusOr<epb::TxnResponse> Txn(
      const epb::TxnRequest& request,
      absl::Time deadline = absl::InfiniteFuture());
  absl::StatusOr<epb::DeleteRangeResponse> DeleteRange(
      const epb::DeleteRangeRequest& request);
  // Drops etcd's history before `revision` (KV.Compact). Compacting to a
  // revision already compacted is OK.
  absl::Status Compact(int64_t revision);
  // The current endpoint's member status (Maintenance.Status: db size,
  // raft index, leader).
  absl::StatusOr<epb::StatusResponse> MemberStatus();

  // Grants a lease of `ttl` (whole seconds, at least 1); returns its id.
  absl::StatusOr<int64_t> LeaseGrant(absl::Duration ttl);
  // Renews `lease` once; returns the TTL etcd granted. Fails with NotFound
  // when the lease has expired or was revoked.
  absl::StatusOr<absl::Duration> LeaseKeepAlive(
      int64_t lease, absl::Time deadline = absl::InfiniteFuture());
  // Revokes `lease` (its keys are deleted). Fails with NotFound when it
  // has expired or was revoked already.
  absl::Status LeaseRevoke(int64_t lease,
                           absl::Time deadline = absl::InfiniteFuture());

  // Watches [key, range_end) from `start_revision` (0 = from now). The
  // stream lives until Cancel or `stream_timeout`.
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(
      const std::string& key, const std::string& range_end,
      int64_t start_revision, absl::Duration stream_timeout);

  // The endpoint calls go to now (changes on UNAVAILABLE).
  std::string current_endpoint() const;

 private:
  struct Endpoint {
    std::string target;  // host:port
    std::shared_ptr<grpc::Channel> channel;
  };
  explicit EtcdClient(EtcdClientOptions options)
      : options_(std::move(options)) {}

  // Runs `call(channel, context)` against the current endpoint, moving to
  // the next one on UNAVAILABLE or DEADLINE_EXCEEDED (never past
  // `deadline`), and re-authenticating once when the token was refused.
  template <typename Call>
  absl::Status Invoke(Call call, absl::Time deadline = absl::InfiniteFuture());
  // Sets the deadline, the leader requirement and the auth token on
  // `context`.
  void Prepare(grpc::ClientContext& context, absl::Time deadline);
  // True when a user is configured and no token is held.
  bool NeedsToken() const;
  // Fetches a token from `channel` (when a user is configured).
  absl::Status Authenticate(const std::shared_ptr<grpc::Channel>& channel,
                            absl::Time deadline);
  // The current endpoint's channel and its index.
  std::pair<std::shared_ptr<grpc::Channel>, size_t> Current() const;
  void Advance(size_t from);

  const EtcdClientOptions options_;
  std::vector<Endpoint> endpoints_;
  mutable Mutex mu_;
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
  std::string token_ ABSL_GUARDED_BY(mu_);
};

// The key just after every key that starts with `prefix` (a range_end for
// "all keys under prefix").
std::string PrefixEnd(const std::string& prefix);

// Converts a gRPC status to an absl::Status with the same code.
absl::Status FromGrpc(const grpc::Status& status, absl::string_view what);

}  // namespace phalanx::storage::etcd

#endif  // PHALANX_STORAGE_ETCD_ETCD_CLIENT_H_
