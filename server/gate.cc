#include "server/gate.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/validate.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {
namespace {

constexpr RpcMethod kMethods[] = {
    rpc::kSubmitGang,    rpc::kCancelGang,       rpc::kGetGang,
    rpc::kListGangs,     rpc::kWatchGangs,       rpc::kReportGang,
    rpc::kExplainGang,   rpc::kDryRunGang,       rpc::kUpsertNodes,
    rpc::kSetNodeState,  rpc::kRemoveNode,       rpc::kHeartbeat,
    rpc::kListNodes,     rpc::kGetTopology,      rpc::kGetConfig,
    rpc::kUpdateConfig,  rpc::kPutQueue,         rpc::kDeleteQueue,
    rpc::kListQueues,    rpc::kListAuditRecords, rpc::kRenewGangLease,
    rpc::kCreateBackup,  rpc::kWatchGangBatches, rpc::kReportNodeHealth,
    rpc::kExportHistory,
};

const char* Needs(Access access) {
  switch (access) {
    case Access::kGangWrite:
      return "ADMIN or TENANT";
    case Access::kGangRead:
      return "ADMIN, VIEWER or TENANT";
    case Access::kNodeState:
    case Access::kHeartbeat:
      return "ADMIN or NODE_AGENT";
    case Access::kClusterRead:
      return "any role";
    case Access::kFleetWrite:
    case Access::kAdmin:
      return "ADMIN";
  }
  return "ADMIN";
}

// "SubmitGang" of "/phalanx.v1.Scheduler/SubmitGang".
absl::string_view ShortName(const RpcMethod& method) {
  absl::string_view name = method.name;
  return name.substr(name.rfind('/') + 1);
}

}  // namespace

bool IsKnownMethod(absl::string_view name) {
  for (const RpcMethod& method : kMethods) {
    if (name == method.name) return true;
  }
  return absl::StartsWith(name, "/grpc.health.v1.Health/") ||
         absl::StartsWith(name, "/grpc.reflection.v1alpha.ServerReflection/");
}

bool RateLimiter::Allow(const Caller& caller, absl::Time now) {
  const auth::Principal* p = caller.principal();
  if (p == nullptr) return true;  // development mode: no per-principal limits
  MutexLock lock(&mu_);
  const double rate = p->requests_per_second.value_or(rate_);
  const double burst = static_cast<double>(p->request_burst.value_or(burst_));
  auto [it, inserted] = buckets_.try_emplace(p->name, Bucket{burst, now});
  Bucket& bucket = it->second;
  if (!inserted && now > bucket.last) {
    bucket.tokens = std::min(
        burst, bucket.tokens + rate * absl::ToDoubleSeconds(now - bucket.last));
    bucket.last = now;
  }
  bucket.tokens = std::min(bucket.tokens, burst);
  if (bucket.tokens < 1) return false;
  bucket.tokens -= 1;
  return true;
}

void RateLimiter::SetDefaults(double requests_per_second, int64_t burst) {
  MutexLock lock(&mu_);
  rate_ = requests_per_second;
  burst_ = burst;
}

void Gate::OnApplied(const core::Mutation&, const core::Scheduler& scheduler,
                     absl::Duration, int) {
  const core::LimitsConfig& limits = scheduler.config().limits;
  limiter_.SetDefaults(limits.requests_per_second, limits.request_burst);
}

absl::StatusOr<Caller> Gate::Admit(grpc::ServerContextBase& context,
                                   const RpcMethod& method,
                                   absl::string_view target) {
  const absl::Time now = absl::Now();
  absl::StatusOr<Caller> caller = authenticator_->Authenticate(context, now);
  if (!caller.ok()) {
    Count(method, "unauthenticated");
    Record(now, "", method, target, caller.status().code(),
           caller.status().message());
    return caller.status();
  }
  if (!caller->Allows(method.access)) {
    return Refuse(*caller, method, target, "role",
                  absl::PermissionDeniedError(absl::StrCat(
                      "principal ", core::QuoteForError(caller->name()),
                      " (roles: ", caller->RoleNames(), ") may not call ",
                      ShortName(method), ": it needs ", Needs(method.access))));
  }
  if (!limiter_.Allow(*caller, now)) {
    return Refuse(*caller, method, target, "rate",
                  absl::ResourceExhaustedError(absl::StrCat(
                      "principal ", core::QuoteForError(caller->name()),
                      " is over its request rate; retry later")));
  }
  if (role_ != nullptr && !role_->leading() &&
      (!method.follower_serves || role_->stale())) {
    const std::string leader = role_->leader_address();
    if (!leader.empty())
      context.AddTrailingMetadata(kLeaderMetadataKey, leader);
    return absl::UnavailableError(absl::StrCat(
        ShortName(method),
        method.follower_serves
            ? ": this replica lost touch with etcd, its reads may be stale; "
            : ": this replica follows; ",
        leader.empty() ? std::string("no leader is known yet, retry")
                       : absl::StrCat("the leader is at ", leader)));
  }
  return caller;
}

absl::Status Gate::Refuse(const Caller& caller, const RpcMethod& method,
                          absl::string_view target, absl::string_view reason,
                          absl::Status status) {
  Count(method, reason);
  Record(absl::Now(), caller.name(), method, target, status.code(),
         status.message());
  return status;
}

void Gate::CountDenied(const RpcMethod& method, absl::string_view reason) {
  Count(method, reason);
}

void Gate::Audit(const Caller& caller, const RpcMethod& method,
                 absl::string_view target, const absl::Status& outcome,
                 absl::string_view summary) {
  Record(
      absl::Now(), caller.name(), method, target, outcome.code(),
      outcome.ok() ? summary : absl::StrCat(summary, ": ", outcome.message()));
}

void Gate::Count(const RpcMethod& method, absl::string_view reason) {
  if (denials_ != nullptr) denials_->OnDenied(method, reason);
}

void Gate::Record(absl::Time time, const std::string& principal,
                  const RpcMethod& method, absl::string_view target,
                  absl::StatusCode outcome, absl::string_view summary) {
  if (audit_ == nullptr) return;
  // Client input is cut, so a hostile id cannot fill the audit log.
  constexpr size_t kMaxTargetBytes = 128, kMaxSummaryBytes = 1024;
  audit_->Record({time, principal, method.name,
                  std::string(target.substr(0, kMaxTargetBytes)), outcome,
                  std::string(summary.substr(0, kMaxSummaryBytes))});
}

absl::Status QueueDenied(const Caller& caller, absl::string_view queue) {
  return absl::PermissionDeniedError(absl::StrCat(
      "principal ", core::QuoteForError(caller.name()), " may not use queue ",
      core::QuoteForError(queue), ": it is not in its queues"));
}

}  // namespace phalanx::server
