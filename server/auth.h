// Authentication and authorization of every RPC (docs/security.md).
//
// Authenticator resolves the caller of one call, on every call (nothing is
// remembered on a connection): a bearer token from the `authorization`
// metadata (its SHA-256 compared in constant time with every principal's),
// else the subject CN of a verified TLS client certificate. Without --auth
// it runs in development mode: every caller is an admin. Thread-safe;
// Replace (SIGHUP) swaps the principals atomically.
//
// Access names what an RPC needs; Caller answers whether it has it, and
// which queues it may see.
#ifndef PHALANX_SERVER_AUTH_H_
#define PHALANX_SERVER_AUTH_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/auth_config.h"
#include "server/scheduler_loop.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {

// What an RPC needs of its caller (the table in docs/security.md).
enum class Access {
  kGangWrite,    // Submit, Cancel, Report, DryRun: admin; tenant, own queues
  kGangRead,     // Get, List, Watch, Explain: admin, viewer; tenant, own
  kFleetWrite,   // UpsertNodes, RemoveNode: admin
  kNodeState,    // SetNodeState: admin; node agent (UNHEALTHY <-> READY)
  kHeartbeat,    // Heartbeat: admin, node agent
  kClusterRead,  // ListNodes, GetTopology, GetConfig, ListQueues: any role
  kAdmin,        // UpdateConfig, PutQueue, DeleteQueue, ListAuditRecords
};

// The authenticated caller of one RPC. Cheap to copy.
class Caller {
 public:
  // Development mode (no --auth): an admin named "".
  static Caller Anonymous();
  explicit Caller(std::shared_ptr<const auth::Principal> principal)
      : principal_(std::move(principal)) {}

  // "" in development mode.
  const std::string& name() const;
  bool Has(auth::RoleBit role) const;
  // Whether the caller's roles allow `access` at all (queues aside).
  bool Allows(Access access) const;
  // Whether `access` on gangs of `queue` is allowed: admins everywhere,
  // viewers for reads, tenants in their queues and every queue below them.
  bool AllowsQueue(Access access, const std::string& queue,
                   const QueueParents& parents) const;
  // Whether the caller is limited to some queues for `access` (a tenant
  // without a wider role).
  bool ScopedTo(Access access) const;
  // Its roles, for messages ("TENANT,VIEWER"; "ADMIN" in development mode).
  std::string RoleNames() const;
  // The principal's own limits; null in development mode.
  const auth::Principal* principal() const { return principal_.get(); }

 private:
  bool InScope(const std::string& queue, const QueueParents& parents) const;

  std::shared_ptr<const auth::Principal> principal_;  // null: anonymous admin
};

class Authenticator {
 public:
  // Development mode: every caller is an anonymous admin.
  Authenticator() = default;
  explicit Authenticator(auth::AuthPolicy policy);

  bool enabled() const { return enabled_; }
  // Replaces the principals (SIGHUP). Calls already authenticated keep
  // their caller.
  void Replace(auth::AuthPolicy policy);
  // The caller of `context` at `now`. UNAUTHENTICATED (never naming the
  // token) for a missing, malformed, unknown or expired credential.
  absl::StatusOr<Caller> Authenticate(const grpc::ServerContextBase& context,
                                      absl::Time now) const;

 private:
  using Principals = std::vector<std::shared_ptr<const auth::Principal>>;
  std::shared_ptr<const Principals> principals() const;
  absl::StatusOr<Caller> ByToken(absl::string_view header,
                                 absl::Time now) const;
  absl::StatusOr<Caller> ByCertificate(const grpc::ServerContextBase& context,
                                       absl::Time now) const;

  bool enabled_ = false;
  mutable Mutex mu_;
  std::shared_ptr<const Principals> principals_ ABSL_GUARDED_BY(mu_) =
      std::make_shared<Principals>();
};

// SHA-256 of `text`.
auth::Sha256 Sha256Of(absl::string_view text);
// Lower-case hex of a digest (what --auth files hold).
std::string HexOf(const auth::Sha256& digest);

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_AUTH_H_
