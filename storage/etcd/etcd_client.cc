#include "storage/etcd/etcd_client.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"
#include "storage/sync/mutex.h"

namespace phalanx::storage::etcd {
namespace {

// Larger than any response we ask for (log pages are bounded by count).
constexpr int kMaxReceiveBytes = 64 << 20;

absl::StatusOr<std::string> ReadPem(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(
    const EtcdClientOptions& options) {
  if (!options.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  if (!options.tls_files.ca_file.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(options.tls_files.ca_file));
  }
  if (!options.tls_files.cert_file.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadPem(options.tls_files.cert_file));
    ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPem(options.tls_files.key_file));
  }
  return grpc::SslCredentials(ssl);
}

// "http://h:p" -> "h:p"; fails on an empty host:port.
absl::StatusOr<std::string> Target(absl::string_view endpoint, bool* tls) {
  if (absl::ConsumePrefix(&endpoint, "https://")) {
    *tls = true;
  } else {
    absl::ConsumePrefix(&endpoint, "http://");
  }
  absl::ConsumeSuffix(&endpoint, "/");
  if (endpoint.empty() || !absl::StrContains(endpoint, ':')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "etcd endpoint: want host:port, got \"", endpoint.substr(0, 64), "\""));
  }
  return std::string(endpoint);
}

bool TokenRefused(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAUTHENTICATED;
}

// An attempt that another member may answer: this one is down, cut off
// from its quorum ("no leader"), or did not answer in time.
bool TryNextEndpoint(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

int Millis(absl::Duration d) {
  return static_cast<int>(absl::ToInt64Milliseconds(d));
}

}  // namespace

absl::Status FromGrpc(const grpc::Status& status, absl::string_view what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(end.back() + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(
    EtcdClientOptions options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("etcd endpoints: none given");
  }
  std::vector<std::string> targets;
  for (const std::string& endpoint : options.endpoints) {
    ASSIGN_OR_RETURN(std::string target, Target(endpoint, &options.tls));
    targets.push_back(std::move(target));
  }
  ASSIGN_OR_RETURN(auto credentials, Credentials(options));
  std::unique_ptr<EtcdClient> client(new EtcdClient(std::move(options)));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxReceiveBytes);
  // Fail fast on a dead endpoint so the client moves to the next one.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Find a connection that died silently (a partition) by its pings, not
  // by TCP's retransmission backoff; ping only while calls are open, as
  // etcd's keepalive policy wants.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
              Millis(client->options_.keepalive_time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              Millis(client->options_.keepalive_timeout));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  for (std::string& target : targets) {
    auto channel = grpc::CreateCustomChannel(target, credentials, args);
    client->endpoints_.push_back({std::move(target), std::move(channel)});
  }
  return client;
}

std::string EtcdClient::current_endpoint() const {
  MutexLock lock(&mu_);
  return endpoints_[current_].target;
}

std::pair<std::shared_ptr<grpc::Channel>, size_t> EtcdClient::Current() const {
  MutexLock lock(&mu_);
  return {endpoints_[current_].channel, current_};
}

void EtcdClient::Advance(size_t from) {
  MutexLock lock(&mu_);
  // Another call may have moved on already; move only once per failure.
  if (current_ == from) current_ = (current_ + 1) % endpoints_.size();
}

void EtcdClient::Prepare(grpc::ClientContext& context, absl::Time deadline) {
  context.set_deadline(absl::ToChronoTime(deadline));
  // etcd's require-leader metadata: a member without a raft leader
  // answers UNAVAILABLE ("no leader") instead of holding the call.
  context.AddMetadata("hasleader", "true");
  MutexLock lock(&mu_);
  if (!token_.empty()) context.AddMetadata("token", token_);
}

absl::Status EtcdClient::Authenticate(
    const std::shared_ptr<grpc::Channel>& channel, absl::Time deadline) {
  if (options_.user.empty()) return absl::OkStatus();
  auto stub = epb::Auth::NewStub(channel);
  epb::AuthenticateRequest request;
  request.set_name(options_.user);
  request.set_password(options_.password);
  epb::AuthenticateResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  RETURN_IF_ERROR(FromGrpc(stub->Authenticate(&context, request, &response),
                           "etcd authenticate"));
  MutexLock lock(&mu_);
  token_ = response.token();
  return absl::OkStatus();
}

bool EtcdClient::NeedsToken() const {
  MutexLock lock(&mu_);
  return !options_.user.empty() && token_.empty();
}

template <typename Call>
absl::Status EtcdClient::Invoke(Call call, absl::Time deadline) {
  absl::Status last =
      absl::DeadlineExceededError("etcd: the call's deadline had passed");
  bool reauthenticated = false;
  // At most one try per endpoint, plus one after a refused token.
  size_t tried = 0;
  while (tried < endpoints_.size() && absl::Now() < deadline) {
    auto [channel, index] = Current();
    const absl::Time attempt_deadline =
        std::min(deadline, absl::Now() + options_.call_timeout);
    last = NeedsToken() ? Authenticate(channel, attempt_deadline)
                        : absl::OkStatus();
    if (last.ok()) {
      grpc::ClientContext context;
      Prepare(context, attempt_deadline);
      const grpc::Status status = call(channel, context);
      if (TokenRefused(status) && !options_.user.empty() && !reauthenticated) {
        reauthenticated = true;
        MutexLock lock(&mu_);
        token_.clear();
        continue;
      }
      last = FromGrpc(status, "etcd");
    }
    if (!TryNextEndpoint(last)) return last;
    Advance(index);
    ++tried;
  }
  return last;
}

absl::StatusOr<epb::RangeResponse> EtcdClient::Range(
    const epb::RangeRequest& request, absl::Time deadline) {
  epb::RangeResponse response;
  RETURN_IF_ERROR(Invoke(
      [&](auto channel, grpc::ClientContext& context) {
        return epb::KV::NewStub(channel)->Range(&context, request, &response);
      },
      deadline));
  return response;
}

absl::StatusOr<epb::PutResponse> EtcdClient::Put(
    const epb::PutRequest& request) {
  epb::PutResponse response;
  RETURN_IF_ERROR(Invoke([&](auto channel, grpc::ClientContext& context) {
    return epb::KV::NewStub(channel)->Put(&context, request, &response);
  }));
  return response;
}

absl::StatusOr<epb::TxnResponse> EtcdClient::Txn(const epb::TxnRequest& request,
                                                 absl::Time deadline) {
  epb::TxnResponse response;
  RETURN_IF_ERROR(Invoke(
      [&](auto channel, grpc::ClientContext& context) {
        return epb::KV::NewStub(channel)->Txn(&context, request, &response);
      },
      deadline));
  return response;
}

absl::StatusOr<epb::DeleteRangeResponse> EtcdClient::DeleteRange(
    const epb::DeleteRangeRequest& request) {
  epb::DeleteRangeResponse response;
  RETURN_IF_ERROR(Invoke([&](auto channel, grpc::ClientContext& context) {
    return epb::KV::NewStub(channel)->DeleteRange(&context, request, &response);
  }));
  return response;
}

absl::Status EtcdClient::Compact(int64_t revision) {
  epb::CompactionRequest request;
  request.set_revision(revision);
  epb::CompactionResponse response;
  absl::Status status = Invoke([&](auto channel, grpc::ClientContext& context) {
    return epb::KV::NewStub(channel)->Compact(&context, request, &response);
  });
  // "mvcc: required revision has been compacted": someone compacted further.
  if (status.code() == absl::StatusCode::kOutOfRange) return absl::OkStatus();
  return status;
}

absl::StatusOr<epb::StatusResponse> EtcdClient::MemberStatus() {
  epb::StatusRequest request;
  epb::StatusResponse response;
  RETURN_IF_ERROR(Invoke([&](auto channel, grpc::ClientContext& context) {
    return epb::Maintenance::NewStub(channel)->Status(&context, request,
                                                      &response);
  }));
  return response;
}

absl::StatusOr<int64_t> EtcdClient::LeaseGrant(absl::Duration ttl) {
  epb::LeaseGrantRequest request;
  request.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(ttl)));
  epb::LeaseGrantResponse response;
  RETURN_IF_ERROR(Invoke([&](auto channel, grpc::ClientContext& context) {
    return epb::Lease::NewStub(channel)->LeaseGrant(&context, request,
                                                    &response);
  }));
  if (!response.error().empty()) {
    return absl::UnavailableError(
        absl::StrCat("etcd lease grant: ", response.error()));
  }
  return response.id();
}

absl::StatusOr<absl::Duration> EtcdClient::LeaseKeepAlive(int64_t lease,
                                                          absl::Time deadline) {
  epb::LeaseKeepAliveRequest request;
  request.set_id(lease);
  epb::LeaseKeepAliveResponse response;
  RETURN_IF_ERROR(Invoke(
      [&](auto channel, grpc::ClientContext& context) {
        // One request and one response on a fresh stream ("keepalive once").
        auto stream = epb::Lease::NewStub(channel)->LeaseKeepAlive(&context);
        if (!stream->Write(request) || !stream->Read(&response)) {
          return stream->Finish();
        }
        stream->WritesDone();
        context.TryCancel();
        stream->Finish();
        return grpc::Status::OK;
      },
      deadline));
  if (response.ttl() <= 0) {
    return absl::NotFoundError(
        absl::StrCat("etcd lease ", lease, ": expired or revoked"));
  }
  return absl::Seconds(response.ttl());
}

absl::Status EtcdClient::LeaseRevoke(int64_t lease, absl::Time deadline) {
  epb::LeaseRevokeRequest request;
  request.set_id(lease);
  epb::LeaseRevokeResponse response;
  return Invoke(
      [&](auto channel, grpc::ClientContext& context) {
        return epb::Lease::NewStub(channel)->LeaseRevoke(&context, request,
                                                         &response);
      },
      deadline);
}

absl::StatusOr<std::unique_ptr<WatchStream>> EtcdClient::Watch(
    const std::string& key, const std::string& range_end,
    int64_t start_revision, absl::Duration stream_timeout) {
  epb::WatchRequest request;
  epb::WatchCreateRequest* create = request.mutable_create_request();
  create->set_key(key);
  create->set_range_end(range_end);
  create->set_start_revision(start_revision);
  // Try each endpoint at most once until one confirms the watch.
  absl::Status last;
  for (size_t attempt = 0; attempt < endpoints_.size(); ++attempt) {
    auto [channel, index] = Current();
    std::unique_ptr<WatchStream> watch(new WatchStream());
    Prepare(watch->context_, absl::Now() + stream_timeout);
    watch->stub_ = epb::Watch::NewStub(channel);
    watch->stream_ = watch->stub_->Watch(&watch->context_);
    epb::WatchResponse created;
    if (watch->stream_->Write(request) && watch->stream_->Read(&created) &&
        created.created()) {
      if (created.canceled()) {
        return absl::OutOfRangeError(absl::StrCat(
            "etcd watch: compacted up to ", created.compact_revision(), " ",
            created.cancel_reason()));
      }
      return watch;
    }
    watch->context_.TryCancel();
    last = FromGrpc(watch->stream_->Finish(), "etcd watch");
    watch->stream_.reset();
    // A member cut off from the quorum: the watch's time is spent, but the
    // next call goes elsewhere.
    if (!TryNextEndpoint(last)) return last;
    Advance(index);
    if (last.code() == absl::StatusCode::kDeadlineExceeded) return last;
  }
  return last;
}

WatchStream::~WatchStream() {
  if (!stream_) return;
  context_.TryCancel();
  stream_->Finish();
}

void WatchStream::Cancel() { context_.TryCancel(); }

absl::StatusOr<epb::WatchResponse> WatchStream::Read() {
  if (!stream_) return absl::FailedPreconditionError("etcd watch: ended");
  epb::WatchResponse response;
  while (stream_->Read(&response)) {
    if (response.canceled()) {
      return absl::OutOfRangeError(absl::StrCat(
          "etcd watch canceled (compacted up to ", response.compact_revision(),
          "): ", response.cancel_reason()));
    }
    if (response.events_size() > 0) return response;
  }
  grpc::Status status = stream_->Finish();
  stream_.reset();
  if (status.ok()) return absl::CancelledError("etcd watch: stream ended");
  return FromGrpc(status, "etcd watch");
}

}  // namespace phalanx::storage::etcd
