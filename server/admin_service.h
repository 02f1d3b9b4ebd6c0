// AdminService: the phalanx.v1.Admin gRPC service (configuration and queues).
// Every call runs on the scheduler loop; changes take effect at the next
// cycle and are durable before the reply. Thread-safe.
#ifndef PHALANX_SERVER_ADMIN_SERVICE_H_
#define PHALANX_SERVER_ADMIN_SERVICE_H_

#include <functional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "phalanx/v1/admin.grpc.pb.h"
#include "server/audit_log.h"
#include "server/gate.h"
#include "server/scheduler_loop.h"

namespace phalanx::server {

class AdminService final : public v1::Admin::CallbackService {
 public:
  // Writes a backup of the store to a directory and returns its revision
  // (RocksDbStore::CreateCheckpoint). Runs on the loop thread, between
  // commits.
  using Backup = std::function<absl::StatusOr<int64_t>(const std::string&)>;

  // `backup` may be null (CreateBackup is then UNIMPLEMENTED).
  AdminService(SchedulerLoop* loop, Gate* gate, AuditLog* audit,
               Backup backup = nullptr)
      : loop_(loop), gate_(gate), audit_(audit), backup_(std::move(backup)) {}

  grpc::ServerUnaryReactor* GetConfig(grpc::CallbackServerContext* context,
                                      const v1::GetConfigRequest* request,
                                      v1::Config* response) override;
  grpc::ServerUnaryReactor* UpdateConfig(grpc::CallbackServerContext* context,
                                         const v1::UpdateConfigRequest* request,
                                         v1::Config* response) override;
  grpc::ServerUnaryReactor* PutQueue(grpc::CallbackServerContext* context,
                                     const v1::PutQueueRequest* request,
                                     v1::Queue* response) override;
  grpc::ServerUnaryReactor* DeleteQueue(
      grpc::CallbackServerContext* context,
      const v1::DeleteQueueRequest* request,
      v1::DeleteQueueResponse* response) override;
  grpc::ServerUnaryReactor* ListQueues(
      grpc::CallbackServerContext* context,
      const v1::ListQueuesRequest* request,
      v1::ListQueuesResponse* response) override;
  grpc::ServerUnaryReactor* ListAuditRecords(
      grpc::CallbackServerContext* context,
      const v1::ListAuditRecordsRequest* request,
      v1::ListAuditRecordsResponse* response) override;
  // Admins only, audited. The checkpoint is taken on the loop thread, so it
  // holds exactly the batches committed before this call's batch; the loop
  // waits for it (a memtable flush and hard links).
  grpc::ServerUnaryReactor* CreateBackup(
      grpc::CallbackServerContext* context,
      const v1::CreateBackupRequest* request,
      v1::CreateBackupResponse* response) override;
  // Admins only (not audited: a read). Served from the published view, on
  // the calling thread, so an HA follower serves it too
  // (server/history_export.h).
  grpc::ServerUnaryReactor* ExportHistory(
      grpc::CallbackServerContext* context,
      const v1::ExportHistoryRequest* request,
      v1::ExportHistoryResponse* response) override;

 private:
  SchedulerLoop* loop_;
  Gate* gate_;
  AuditLog* audit_;
  Backup backup_;
};

// Fills `out` with the queue and its live status.
void QueueToProto(const core::Scheduler& scheduler, const core::Queue& queue,
                  v1::Queue* out);

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_ADMIN_SERVICE_H_
