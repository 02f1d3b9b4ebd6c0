#include "server/admin_service.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "core/validate.h"
#include "proto/convert.h"
#include "proto/field_mask.h"
#include "server/history_export.h"
#include "server/rpc.h"

namespace phalanx::server {

void QueueToProto(const core::Scheduler& scheduler, const core::Queue& queue,
                  v1::Queue* out) {
  convert::ToProto(queue, out);
  const core::QueueUsage usage = scheduler.Usage(queue.name);
  v1::QueueStatus* status = out->mutable_status();
  for (const auto& [model, gpus] : usage.held_gpus) {
    (*status->mutable_held_gpus())[model] = gpus;
  }
  status->set_pending_gangs(usage.pending);
  status->set_active_gangs(usage.active);
  status->set_borrowed_gpus(scheduler.quotas().BorrowedGpus(queue.name));
  status->set_fair_share_score(scheduler.quotas().Score(queue.name).value);
  status->set_decayed_usage_gpus(
      scheduler.quotas().ledger().DecayedUsage(queue.name));
}

grpc::ServerUnaryReactor* AdminService::GetConfig(
    grpc::CallbackServerContext* context, const v1::GetConfigRequest*,
    v1::Config* response) {
  auto caller = gate_->Admit(*context, rpc::kGetConfig);
  if (!caller.ok()) return FinishNow(context, caller.status());
  return RunOnLoop(
      *loop_, context,
      [response](core::Scheduler& s, absl::Time) {
        convert::ToProto(s.config(), response);
        return absl::OkStatus();
      },
      /*mutates=*/false);
}

grpc::ServerUnaryReactor* AdminService::UpdateConfig(
    grpc::CallbackServerContext* context,
    const v1::UpdateConfigRequest* request, v1::Config* response) {
  auto caller = gate_->Admit(*context, rpc::kUpdateConfig, "config");
  if (!caller.ok()) return FinishNow(context, caller.status());
  std::optional<int64_t> expected;
  if (request->has_expected_version()) expected = request->expected_version();
  if (request->update_mask().paths_size() > 0) {
    // Only the named fields change: merged onto the config in force on the
    // loop, so the merge and the version check see the same config.
    if (auto s = convert::CheckFieldMask(request->update_mask(),
                                         *v1::Config::descriptor(), {"version"},
                                         "update_mask");
        !s.ok()) {
      return FinishNow(context, s);
    }
    return RunOnLoop(
        *loop_, context,
        Audited(
            gate_, *caller, rpc::kUpdateConfig, "config",
            absl::StrCat("update ",
                         absl::StrJoin(request->update_mask().paths(), ",")),
            [mask = request->update_mask(), patch = request->config(), expected,
             response](core::Scheduler& s, absl::Time) -> absl::Status {
              v1::Config merged;
              convert::ToProto(s.config(), &merged);
              convert::ApplyFieldMask(mask, patch, &merged);
              ASSIGN_OR_RETURN(core::Config config,
                               convert::ConfigFromProto(merged, "config"));
              ASSIGN_OR_RETURN(core::Config stored,
                               s.UpdateConfig(config, expected));
              convert::ToProto(stored, response);
              return absl::OkStatus();
            }));
  }
  auto config = convert::ConfigFromProto(request->config(), "config");
  if (!config.ok()) return FinishNow(context, config.status());
  return RunOnLoop(
      *loop_, context,
      Audited(gate_, *caller, rpc::kUpdateConfig, "config", "update",
              [config = *std::move(config), expected, response](
                  core::Scheduler& s, absl::Time) -> absl::Status {
                ASSIGN_OR_RETURN(core::Config stored,
                                 s.UpdateConfig(config, expected));
                convert::ToProto(stored, response);
                return absl::OkStatus();
              }));
}

grpc::ServerUnaryReactor* AdminService::PutQueue(
    grpc::CallbackServerContext* context, const v1::PutQueueRequest* request,
    v1::Queue* response) {
  const std::string& name = request->queue().name();
  auto caller = gate_->Admit(*context, rpc::kPutQueue, name);
  if (!caller.ok()) return FinishNow(context, caller.status());
  if (request->update_mask().paths_size() > 0) {
    if (auto s = convert::CheckFieldMask(request->update_mask(),
                                         *v1::Queue::descriptor(),
                                         {"name", "status"}, "update_mask");
        !s.ok()) {
      return FinishNow(context, s);
    }
    return RunOnLoop(
        *loop_, context,
        Audited(
            gate_, *caller, rpc::kPutQueue, name,
            absl::StrCat("update ",
                         absl::StrJoin(request->update_mask().paths(), ",")),
            [mask = request->update_mask(), patch = request->queue(), response](
                core::Scheduler& s, absl::Time) -> absl::Status {
              const core::QueueName name(patch.name());
              auto it = s.queues().find(name);
              if (it == s.queues().end()) {
                return absl::NotFoundError(absl::StrCat(
                    "queue.name: no queue ", core::QuoteForError(name.value()),
                    " to update (without update_mask PutQueue creates "
                    "it)"));
              }
              v1::Queue merged;
              convert::ToProto(it->second, &merged);
              convert::ApplyFieldMask(mask, patch, &merged);
              ASSIGN_OR_RETURN(core::Queue stored,
                               s.PutQueue(convert::QueueFromProto(merged)));
              QueueToProto(s, stored, response);
              return absl::OkStatus();
            }));
  }
  return RunOnLoop(
      *loop_, context,
      Audited(gate_, *caller, rpc::kPutQueue, name, "put",
              [queue = convert::QueueFromProto(request->queue()), response](
                  core::Scheduler& s, absl::Time) -> absl::Status {
                ASSIGN_OR_RETURN(core::Queue stored, s.PutQueue(queue));
                QueueToProto(s, stored, response);
                return absl::OkStatus();
              }));
}

grpc::ServerUnaryReactor* AdminService::DeleteQueue(
    grpc::CallbackServerContext* context, const v1::DeleteQueueRequest* request,
    v1::DeleteQueueResponse*) {
  if (auto s = RequireNonEmpty(request->name(), "name"); !s.ok()) {
    return FinishNow(context, s);
  }
  auto caller = gate_->Admit(*context, rpc::kDeleteQueue, request->name());
  if (!caller.ok()) return FinishNow(context, caller.status());
  return RunOnLoop(
      *loop_, context,
      Audited(
          gate_, *caller, rpc::kDeleteQueue, request->name(), "delete",
          [name = core::QueueName(request->name())](
              core::Scheduler& s, absl::Time) { return s.DeleteQueue(name); }));
}

grpc::ServerUnaryReactor* AdminService::ListQueues(
    grpc::CallbackServerContext* context, const v1::ListQueuesRequest*,
    v1::ListQueuesResponse* response) {
  auto caller = gate_->Admit(*context, rpc::kListQueues);
  if (!caller.ok()) return FinishNow(context, caller.status());
  return RunOnLoop(
      *loop_, context,
      [response](core::Scheduler& s, absl::Time) {
        for (const auto& [name, queue] : s.queues()) {
          QueueToProto(s, queue, response->add_queues());
        }
        response->set_revision(s.revision());
        return absl::OkStatus();
      },
      /*mutates=*/false);
}

grpc::ServerUnaryReactor* AdminService::ListAuditRecords(
    grpc::CallbackServerContext* context,
    const v1::ListAuditRecordsRequest* request,
    v1::ListAuditRecordsResponse* response) {
  auto caller = gate_->Admit(*context, rpc::kListAuditRecords);
  if (!caller.ok()) return FinishNow(context, caller.status());
  return FinishNow(context, audit_->List(*request, response));
}

grpc::ServerUnaryReactor* AdminService::CreateBackup(
    grpc::CallbackServerContext* context,
    const v1::CreateBackupRequest* request,
    v1::CreateBackupResponse* response) {
  const std::string& directory = request->directory();
  auto caller = gate_->Admit(*context, rpc::kCreateBackup,
                             core::QuoteForError(directory));
  if (!caller.ok()) return FinishNow(context, caller.status());
  if (!backup_) {
    return FinishNow(context,
                     absl::UnimplementedError("this daemon has no backups"));
  }
  return RunOnLoop(*loop_, context,
                   Audited(gate_, *caller, rpc::kCreateBackup,
                           core::QuoteForError(directory), "backup",
                           [backup = backup_, directory, response](
                               core::Scheduler&, absl::Time) -> absl::Status {
                             ASSIGN_OR_RETURN(const int64_t revision,
                                              backup(directory));
                             response->set_revision(revision);
                             response->set_directory(directory);
                             return absl::OkStatus();
                           }),
                   /*mutates=*/false);
}

grpc::ServerUnaryReactor* AdminService::ExportHistory(
    grpc::CallbackServerContext* context,
    const v1::ExportHistoryRequest* request,
    v1::ExportHistoryResponse* response) {
  auto caller = gate_->Admit(*context, rpc::kExportHistory);
  if (!caller.ok()) return FinishNow(context, caller.status());
  return FinishNow(context, ExportHistoryPage(*loop_->view(), *request,
                                              absl::Now(), response));
}

}  // namespace phalanx::server
