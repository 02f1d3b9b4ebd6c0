// SchedulerService: the phalanx.v1.Scheduler gRPC service (docs/design.md §8).
// Handlers validate and convert, then either read the loop's published view
// (GetGang, ListGangs) or run a command on the loop. On the leader, the
// pending gangs GetGang and ListGangs return also take their place in the
// plan from the loop (core::Scheduler::PlanOf; one loop call per answer).
// WatchGangs and WatchGangBatches are served raw (serialized bytes), so the
// watch hub serializes each event once for all streams; the wire format is the
// same. Holds no domain state (only the views that multi-page ListGangs
// listings pin); thread-safe.
#ifndef PHALANX_SERVER_SCHEDULER_SERVICE_H_
#define PHALANX_SERVER_SCHEDULER_SERVICE_H_

#include "phalanx/v1/scheduler.grpc.pb.h"
#include "server/arena_allocator.h"
#include "server/gate.h"
#include "server/listing_views.h"
#include "server/rpc.h"
#include "server/scheduler_loop.h"
#include "server/watch_hub.h"

namespace phalanx::server {

class SchedulerService final
    : public v1::Scheduler::WithRawCallbackMethod_WatchGangs<
          v1::Scheduler::WithRawCallbackMethod_WatchGangBatches<
              v1::Scheduler::CallbackService>> {
 public:
  // The launchers' unary calls get their messages from an arena each.
  SchedulerService(SchedulerLoop* loop, WatchHub* hub, Gate* gate)
      : loop_(loop), hub_(hub), gate_(gate) {
    SetMessageAllocatorFor_SubmitGang(&submit_messages_);
    SetMessageAllocatorFor_GetGang(&get_messages_);
    SetMessageAllocatorFor_CancelGang(&cancel_messages_);
    SetMessageAllocatorFor_ReportGang(&report_messages_);
    SetMessageAllocatorFor_RenewGangLease(&renew_messages_);
  }

  grpc::ServerUnaryReactor* SubmitGang(
      grpc::CallbackServerContext* context,
      const v1::SubmitGangRequest* request,
      v1::SubmitGangResponse* response) override;
  grpc::ServerUnaryReactor* CancelGang(
      grpc::CallbackServerContext* context,
      const v1::CancelGangRequest* request,
      v1::CancelGangResponse* response) override;
  grpc::ServerUnaryReactor* GetGang(grpc::CallbackServerContext* context,
                                    const v1::GetGangRequest* request,
                                    v1::GetGangResponse* response) override;
  grpc::ServerUnaryReactor* ListGangs(grpc::CallbackServerContext* context,
                                      const v1::ListGangsRequest* request,
                                      v1::ListGangsResponse* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchGangs(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchGangBatches(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* ReportGang(
      grpc::CallbackServerContext* context,
      const v1::ReportGangRequest* request,
      v1::ReportGangResponse* response) override;
  grpc::ServerUnaryReactor* RenewGangLease(
      grpc::CallbackServerContext* context,
      const v1::RenewGangLeaseRequest* request,
      v1::RenewGangLeaseResponse* response) override;
  grpc::ServerUnaryReactor* ExplainGang(
      grpc::CallbackServerContext* context,
      const v1::ExplainGangRequest* request,
      v1::ExplainGangResponse* response) override;
  grpc::ServerUnaryReactor* DryRunGang(
      grpc::CallbackServerContext* context,
      const v1::DryRunGangRequest* request,
      v1::DryRunGangResponse* response) override;

 private:
  // The gang `id` if the caller may use it for `method`. NotFound alike
  // whether it does not exist or is in a queue the caller may not see (so
  // a tenant learns nothing of other queues' gangs); the latter is
  // recorded as a refusal.
  absl::StatusOr<core::GangPtr> VisibleGang(const Caller& caller,
                                            const RpcMethod& method,
                                            const std::string& id);
  absl::StatusOr<core::GangPtr> VisibleGang(const Caller& caller,
                                            const RpcMethod& method,
                                            const std::string& id,
                                            const View& view);
  // OK when the caller may use `queue` for `method`; else PERMISSION_DENIED
  // (recorded as a refusal).
  absl::Status CheckQueue(const Caller& caller, const RpcMethod& method,
                          const std::string& queue);
  // The view a ListGangs page token's `revision` is read at: the one this
  // replica pinned for the listing, else the one it published at that
  // revision if still kept (then pinned). Unavailable while this replica
  // has not applied `revision` yet; Aborted when it is no longer kept.
  absl::StatusOr<std::shared_ptr<const View>> ListingView(int64_t revision);
  // WatchGangs and WatchGangBatches: the caller's scope and stream cap,
  // then a hub stream in `format`.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Watch(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer& request,
      const RpcMethod& method, WatchFormat format);
  // Whether gangs read now can carry their place in the plan: this replica
  // leads (a follower makes no plan) and its loop takes calls (writes are
  // not refused: while they are, reads are served from the view alone).
  bool PlanReadable() const;
  // Answers a ListGangs page whose gangs are filled: when PlanReadable, the
  // non-pending ones marked PLAN_STATUS_NOT_PENDING and the plans of the
  // pending ones read on the loop (one call for the page) first.
  grpc::ServerUnaryReactor* AnswerWithPlans(
      grpc::CallbackServerContext* context, v1::ListGangsResponse* response);
  // Fills an ExplainGang answer (all but its revision); the plan's fields
  // (the gang's four, and estimated_start when planned) only when
  // `leading`.
  static void FillExplanation(const core::Explanation& explanation,
                              bool leading, v1::ExplainGangResponse* response);
  // A loop body for Cancel or Report: runs `apply` and, when the caller is
  // not the gang's owner, audits the outcome.
  LoopBody AuditedIfNotOwner(
      const Caller& caller, const RpcMethod& method, const core::Gang& gang,
      std::function<absl::Status(core::Scheduler&, absl::Time)> apply);

  SchedulerLoop* loop_;
  WatchHub* hub_;
  Gate* gate_;
  // Views pinned by multi-page listings (ListGangs page tokens).
  ListingViews listings_;
  ArenaAllocator<v1::SubmitGangRequest, v1::SubmitGangResponse>
      submit_messages_;
  ArenaAllocator<v1::GetGangRequest, v1::GetGangResponse> get_messages_;
  ArenaAllocator<v1::CancelGangRequest, v1::CancelGangResponse>
      cancel_messages_;
  ArenaAllocator<v1::ReportGangRequest, v1::ReportGangResponse>
      report_messages_;
  ArenaAllocator<v1::RenewGangLeaseRequest, v1::RenewGangLeaseResponse>
      renew_messages_;
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_SCHEDULER_SERVICE_H_
