// Gate: what every RPC handler calls first (docs/security.md). It
// authenticates the caller, checks that its roles allow the method, applies
// the caller's request rate, and reports every refusal to the metrics and
// the audit log. Thread-safe.
#ifndef PHALANX_SERVER_GATE_H_
#define PHALANX_SERVER_GATE_H_

#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "server/auth.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {

// One RPC: its full gRPC name and what it needs of the caller.
struct RpcMethod {
  const char* name;  // "/phalanx.v1.Admin/PutQueue"
  Access access;
  bool audited;  // a mutating Fleet or Admin call: audited when it succeeds
  // A read an HA follower serves from its replicated state (docs/ha.md);
  // every other method is redirected to the leader.
  bool follower_serves = false;
};

namespace rpc {
inline constexpr RpcMethod kSubmitGang{"/phalanx.v1.Scheduler/SubmitGang",
                                       Access::kGangWrite, false, false};
inline constexpr RpcMethod kCancelGang{"/phalanx.v1.Scheduler/CancelGang",
                                       Access::kGangWrite, false, false};
inline constexpr RpcMethod kGetGang{"/phalanx.v1.Scheduler/GetGang",
                                    Access::kGangRead, false, true};
inline constexpr RpcMethod kListGangs{"/phalanx.v1.Scheduler/ListGangs",
                                      Access::kGangRead, false, true};
inline constexpr RpcMethod kWatchGangs{"/phalanx.v1.Scheduler/WatchGangs",
                                       Access::kGangRead, false, true};
inline constexpr RpcMethod kWatchGangBatches{
    "/phalanx.v1.Scheduler/WatchGangBatches", Access::kGangRead, false, true};
inline constexpr RpcMethod kReportGang{"/phalanx.v1.Scheduler/ReportGang",
                                       Access::kGangWrite, false, false};
// Same role and queue scope as ReportGang: whoever may report on a gang
// may keep it alive.
inline constexpr RpcMethod kRenewGangLease{
    "/phalanx.v1.Scheduler/RenewGangLease", Access::kGangWrite, false, false};
inline constexpr RpcMethod kExplainGang{"/phalanx.v1.Scheduler/ExplainGang",
                                        Access::kGangRead, false, true};
inline constexpr RpcMethod kDryRunGang{"/phalanx.v1.Scheduler/DryRunGang",
                                       Access::kGangWrite, false, true};
inline constexpr RpcMethod kUpsertNodes{"/phalanx.v1.Fleet/UpsertNodes",
                                        Access::kFleetWrite, true, false};
inline constexpr RpcMethod kSetNodeState{"/phalanx.v1.Fleet/SetNodeState",
                                         Access::kNodeState, true, false};
inline constexpr RpcMethod kRemoveNode{"/phalanx.v1.Fleet/RemoveNode",
                                       Access::kFleetWrite, true, false};
inline constexpr RpcMethod kHeartbeat{"/phalanx.v1.Fleet/Heartbeat",
                                      Access::kHeartbeat, false, false};
// Periodic like Heartbeat: audited by its handler only when it changes
// the node.
inline constexpr RpcMethod kReportNodeHealth{
    "/phalanx.v1.Fleet/ReportNodeHealth", Access::kNodeState, false, false};
inline constexpr RpcMethod kListNodes{"/phalanx.v1.Fleet/ListNodes",
                                      Access::kClusterRead, false, true};
inline constexpr RpcMethod kGetTopology{"/phalanx.v1.Fleet/GetTopology",
                                        Access::kClusterRead, false, true};
inline constexpr RpcMethod kGetConfig{"/phalanx.v1.Admin/GetConfig",
                                      Access::kClusterRead, false, true};
inline constexpr RpcMethod kUpdateConfig{"/phalanx.v1.Admin/UpdateConfig",
                                         Access::kAdmin, true, false};
inline constexpr RpcMethod kPutQueue{"/phalanx.v1.Admin/PutQueue",
                                     Access::kAdmin, true, false};
inline constexpr RpcMethod kDeleteQueue{"/phalanx.v1.Admin/DeleteQueue",
                                        Access::kAdmin, true, false};
inline constexpr RpcMethod kListQueues{"/phalanx.v1.Admin/ListQueues",
                                       Access::kClusterRead, false, true};
inline constexpr RpcMethod kListAuditRecords{
    "/phalanx.v1.Admin/ListAuditRecords", Access::kAdmin, false, true};
inline constexpr RpcMethod kCreateBackup{"/phalanx.v1.Admin/CreateBackup",
                                         Access::kAdmin, true, false};
// A read of every retained gang: admins only, served by a follower too.
inline constexpr RpcMethod kExportHistory{"/phalanx.v1.Admin/ExportHistory",
                                          Access::kAdmin, false, true};
}  // namespace rpc

// The trailing metadata key naming the leader's address on an UNAVAILABLE
// from a follower.
inline constexpr char kLeaderMetadataKey[] = "phalanx-leader";

// Whether this replica takes writes (HA mode, docs/ha.md) and where the
// leader is, as last seen. A replica starts following. Thread-safe.
class ReplicaRole {
 public:
  bool leading() const {
    MutexLock lock(&mu_);
    return leading_;
  }
  void set_leading(bool leading) {
    MutexLock lock(&mu_);
    leading_ = leading;
  }
  // "" when no leader is known.
  std::string leader_address() const {
    MutexLock lock(&mu_);
    return leader_address_;
  }
  void set_leader_address(std::string address) {
    MutexLock lock(&mu_);
    leader_address_ = std::move(address);
  }
  // True while a follower's state may be older than its staleness bound
  // (it lost touch with etcd): it then refuses the reads it serves.
  bool stale() const {
    MutexLock lock(&mu_);
    return stale_;
  }
  void set_stale(bool stale) {
    MutexLock lock(&mu_);
    stale_ = stale;
  }

 private:
  mutable Mutex mu_;
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  bool stale_ ABSL_GUARDED_BY(mu_) = false;
  std::string leader_address_ ABSL_GUARDED_BY(mu_);
};

// Whether `name` is a method this daemon serves (the Phalanx services,
// health and reflection): metrics label unknown names "unknown".
bool IsKnownMethod(absl::string_view name);

// One audited decision.
struct AuditEntry {
  absl::Time time;
  std::string principal;
  std::string method;
  std::string target;
  absl::StatusCode outcome = absl::StatusCode::kOk;
  std::string summary;
};

// Counts refusals (the metrics). `reason` is one of "unauthenticated",
// "role", "queue", "node_state", "rate".
class DenialCounter {
 public:
  virtual ~DenialCounter() = default;
  virtual void OnDenied(const RpcMethod& method, absl::string_view reason) = 0;
};

// Takes audit records (the audit log).
class AuditSink {
 public:
  virtual ~AuditSink() = default;
  virtual void Record(AuditEntry entry) = 0;
};

// Token buckets per principal name. Thread-safe.
class RateLimiter {
 public:
  // Whether one more call of `caller` is allowed at `now`.
  bool Allow(const Caller& caller, absl::Time now);
  // The defaults for principals without their own (config limits).
  void SetDefaults(double requests_per_second, int64_t burst);

 private:
  struct Bucket {
    double tokens = 0;
    absl::Time last;
  };
  Mutex mu_;
  double rate_ ABSL_GUARDED_BY(mu_) = 1000;
  int64_t burst_ ABSL_GUARDED_BY(mu_) = 2000;
  // Keyed by principal name: bounded by the --auth file's principals.
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
};

// Also a batch observer: the config's limits set the default request rate.
class Gate : public BatchObserver {
 public:
  // `denials` and `audit` may be null.
  Gate(const Authenticator* authenticator, DenialCounter* denials,
       AuditSink* audit)
      : authenticator_(authenticator), denials_(denials), audit_(audit) {}

  // In HA mode: the replica's role; null (the default) = always leading.
  // Must outlive the gate.
  void set_role(const ReplicaRole* role) { role_ = role; }

  // The caller of `context`, once authenticated, allowed `method` by its
  // roles and within its request rate; else UNAUTHENTICATED,
  // PERMISSION_DENIED or RESOURCE_EXHAUSTED (recorded for audit with
  // `target`). On an HA follower, a method it does not serve then fails
  // with UNAVAILABLE and trailing metadata kLeaderMetadataKey = the
  // leader's address (when one is known), not counted as a refusal.
  absl::StatusOr<Caller> Admit(grpc::ServerContextBase& context,
                               const RpcMethod& method,
                               absl::string_view target = {});
  // Records a refusal decided after Admit (another queue, a node agent's
  // state rule) and returns `status`. `reason` as in DenialCounter.
  absl::Status Refuse(const Caller& caller, const RpcMethod& method,
                      absl::string_view target, absl::string_view reason,
                      absl::Status status);
  // Counts a refusal whose audit record the caller writes itself.
  void CountDenied(const RpcMethod& method, absl::string_view reason);
  // Records a call for audit (a mutating Fleet or Admin call, an action on
  // another principal's gang).
  void Audit(const Caller& caller, const RpcMethod& method,
             absl::string_view target, const absl::Status& outcome,
             absl::string_view summary);

  bool auth_enabled() const { return authenticator_->enabled(); }

  void OnApplied(const core::Mutation& mutation,
                 const core::Scheduler& scheduler, absl::Duration cycle,
                 int commands) override;
  void OnDurable(const core::Mutation&, absl::Duration, int) override {}
  RateLimiter& rate_limiter() { return limiter_; }

 private:
  void Count(const RpcMethod& method, absl::string_view reason);
  void Record(absl::Time time, const std::string& principal,
              const RpcMethod& method, absl::string_view target,
              absl::StatusCode outcome, absl::string_view summary);

  const Authenticator* authenticator_;
  DenialCounter* denials_;
  AuditSink* audit_;
  const ReplicaRole* role_ = nullptr;
  RateLimiter limiter_;
};

// PERMISSION_DENIED for a gang or queue the caller may not use.
absl::Status QueueDenied(const Caller& caller, absl::string_view queue);

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_GATE_H_
