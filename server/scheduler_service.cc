#include "server/scheduler_service.h"

#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"
#include "core/validate.h"
#include "proto/convert.h"
#include "server/rpc.h"
#include "server/status.h"

namespace phalanx::server {
namespace {

constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;

absl::StatusOr<std::set<core::GangState>> StatesFilter(
    const v1::ListGangsRequest& request) {
  std::set<core::GangState> states;
  for (int i = 0; i < request.states_size(); ++i) {
    ASSIGN_OR_RETURN(core::GangState state,
                     convert::GangStateFromProto(
                         request.states(i), absl::StrCat("states[", i, "]")));
    states.insert(state);
  }
  return states;
}

// A stable fingerprint (FNV-1a) of a listing's filter: a page token is only
// good for the filter it was made with.
uint64_t FilterFingerprint(const std::string& queue,
                           const std::set<core::GangState>& states) {
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](unsigned char c) {
    hash ^= c;
    hash *= 1099511628211ull;
  };
  for (unsigned char c : queue) mix(c);
  mix(0);
  for (core::GangState state : states) mix(static_cast<unsigned char>(state));
  return hash;
}

// A ListGangs page token: "<revision>.<filter fingerprint, hex>.<last id>".
struct PageToken {
  int64_t revision = 0;
  uint64_t filter = 0;
  std::string after;
};

std::string EncodeToken(const PageToken& token) {
  return absl::StrCat(token.revision, ".", absl::Hex(token.filter), ".",
                      token.after);
}

absl::StatusOr<PageToken> DecodeToken(absl::string_view text) {
  const absl::Status bad = absl::InvalidArgumentError(
      "page_token: not a token of ListGangs; pass next_page_token as it "
      "came");
  std::vector<absl::string_view> parts =
      absl::StrSplit(text, absl::MaxSplits('.', 2));
  PageToken token;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &token.revision) ||
      !absl::SimpleHexAtoi(parts[1], &token.filter) || parts[2].empty()) {
    return bad;
  }
  token.after = std::string(parts[2]);
  return token;
}

absl::StatusOr<core::GangReport> ReportFromProto(
    const v1::ReportGangRequest& request) {
  core::GangReport report;
  report.gang_id = core::GangId(request.gang_id());
  if (request.state() != v1::GANG_STATE_UNSPECIFIED) {
    ASSIGN_OR_RETURN(report.state,
                     convert::GangStateFromProto(request.state(), "state"));
  }
  if (request.has_last_checkpoint_time()) {
    ASSIGN_OR_RETURN(report.last_checkpoint_time,
                     convert::TimestampFromProto(request.last_checkpoint_time(),
                                                 "last_checkpoint_time"));
  }
  report.preemption_acknowledged = request.preemption_acknowledged();
  report.message = request.message();
  return report;
}

// A call answered with its gang as it stands after the batch: `id` is set
// before the batch's cycle (by the body or the handler), `gang`, `plan` and
// `revision` are taken on the loop after it. A gang the scheduler no
// longer has keeps the `gang` and `plan` set before (none, or what a read
// found in the view).
struct GangAfter {
  core::GangId id;
  core::GangPtr gang;  // null when there is none
  core::PlannedStart plan;
  int64_t revision = 0;
};

// Runs `body` on the loop (`mutates` = false for a read), then answers with
// response.gang, its place in the plan and response.revision as they stand
// after the batch, so a gang that fits is returned already admitted, with
// its placement. The loop thread only takes the gang's pointer and its
// plan; the proto is built on the reply thread. The call keeps `after`
// alive; the two callbacks hold plain pointers (no allocation).
template <typename Response>
grpc::ServerUnaryReactor* RunAnsweringGang(
    SchedulerLoop& loop, grpc::CallbackServerContext* context, LoopBody body,
    std::shared_ptr<GangAfter> after, Response* response, bool mutates = true) {
  GangAfter* a = after.get();
  return RunOnLoop(
      loop, context, std::move(body), mutates,
      [a](const core::Scheduler& s) {
        if (core::GangPtr gang = s.FindGang(a->id)) {
          a->gang = std::move(gang);
          a->plan = s.PlanOf(a->id);
        }
        a->revision = s.revision();
      },
      [a, response] {
        if (a->gang) {
          convert::ToProto(*a->gang, response->mutable_gang());
          convert::ToProto(a->plan, response->mutable_gang());
        }
        response->set_revision(a->revision);
      },
      std::move(after));
}

// The plans of a listing's PENDING gangs, read on the loop: `ids[i]` is
// the gang of the response's gangs(index[i]).
struct ListedPlans {
  std::vector<int> index;
  std::vector<core::GangId> ids;
  std::vector<core::PlannedStart> plans;
};

std::shared_ptr<GangAfter> AfterOf(const std::string& id) {
  auto after = std::make_shared<GangAfter>();
  after->id = core::GangId(id);
  return after;
}

// A gang read on the leader that is not PENDING: the plan has nothing for
// it, which its status says.
void MarkNotPending(v1::Gang* gang) {
  gang->set_plan_status(v1::PLAN_STATUS_NOT_PENDING);
}

}  // namespace

bool SchedulerService::PlanReadable() const {
  return !loop_->following() && loop_->WritesRefused().ok();
}

absl::StatusOr<std::shared_ptr<const View>> SchedulerService::ListingView(
    int64_t revision) {
  const absl::Time now = absl::Now();
  if (std::shared_ptr<const View> view = listings_.Find(revision, now)) {
    return view;
  }
  // A token another replica issued, or a listing this one stopped keeping.
  if (std::shared_ptr<const View> view = loop_->ViewAt(revision)) {
    listings_.Pin(view, now);
    return view;
  }
  const int64_t applied = loop_->view()->revision;
  if (revision > applied) {
    return absl::UnavailableError(
        absl::StrCat("page_token: the listing is at revision ", revision,
                     ", which this replica has not applied yet (it is at ",
                     applied, "); retry"));
  }
  return absl::AbortedError(absl::StrCat(
      "page_token: the listing at revision ", revision,
      " is no longer kept here (kept ",
      absl::FormatDuration(ListingViews::kIdle),
      " after its last page on the replica that served it, and ",
      absl::FormatDuration(SchedulerLoop::kRecentViewAge),
      " after a newer revision on every replica; not across a restart); "
      "list again from the first page"));
}

absl::Status SchedulerService::CheckQueue(const Caller& caller,
                                          const RpcMethod& method,
                                          const std::string& queue) {
  if (!caller.ScopedTo(method.access)) return absl::OkStatus();
  std::shared_ptr<const View> view = loop_->view();
  if (caller.AllowsQueue(method.access, queue, *view->queue_parents)) {
    return absl::OkStatus();
  }
  return gate_->Refuse(caller, method, queue, "queue",
                       QueueDenied(caller, queue));
}

absl::StatusOr<core::GangPtr> SchedulerService::VisibleGang(
    const Caller& caller, const RpcMethod& method, const std::string& id) {
  return VisibleGang(caller, method, id, *loop_->view());
}

absl::StatusOr<core::GangPtr> SchedulerService::VisibleGang(
    const Caller& caller, const RpcMethod& method, const std::string& id,
    const View& view) {
  core::GangPtr gang = view.gangs.Find(core::GangId(id));
  const absl::Status not_found = absl::NotFoundError(
      absl::StrCat("gang_id: no gang ", core::QuoteForError(id)));
  if (gang == nullptr) return not_found;
  if (!caller.AllowsQueue(method.access, gang->spec.queue.value(),
                          *view.queue_parents)) {
    return gate_->Refuse(caller, method, id, "queue", not_found);
  }
  return gang;
}

LoopBody SchedulerService::AuditedIfNotOwner(
    const Caller& caller, const RpcMethod& method, const core::Gang& gang,
    std::function<absl::Status(core::Scheduler&, absl::Time)> apply) {
  if (gang.owner == caller.name()) return apply;
  return Audited(gate_, caller, method, gang.id.value(),
                 absl::StrCat("gang of ", core::QuoteForError(gang.owner),
                              " in queue ", gang.spec.queue.value()),
                 std::move(apply));
}

grpc::ServerUnaryReactor* SchedulerService::SubmitGang(
    grpc::CallbackServerContext* context, const v1::SubmitGangRequest* request,
    v1::SubmitGangResponse* response) {
  auto caller =
      gate_->Admit(*context, rpc::kSubmitGang, request->spec().queue());
  if (!caller.ok()) return FinishNow(context, caller.status());
  if (auto s = CheckQueue(*caller, rpc::kSubmitGang, request->spec().queue());
      !s.ok()) {
    return FinishNow(context, s);
  }
  auto spec = convert::GangSpecFromProto(request->spec(), "spec");
  if (!spec.ok()) return FinishNow(context, spec.status());
  auto after = std::make_shared<GangAfter>();
  return RunAnsweringGang(
      *loop_, context,
      [spec = *std::move(spec), response, after, owner = caller->name()](
          core::Scheduler& s, absl::Time now) -> absl::Status {
        ASSIGN_OR_RETURN(core::SubmitResult result, s.Submit(spec, now, owner));
        after->id = result.gang->id;
        response->set_created(result.created);
        return absl::OkStatus();
      },
      after, response);
}

grpc::ServerUnaryReactor* SchedulerService::CancelGang(
    grpc::CallbackServerContext* context, const v1::CancelGangRequest* request,
    v1::CancelGangResponse* response) {
  auto caller = gate_->Admit(*context, rpc::kCancelGang, request->gang_id());
  if (!caller.ok()) return FinishNow(context, caller.status());
  if (auto s = CheckId(*loop_, request->gang_id(), "gang_id"); !s.ok()) {
    return FinishNow(context, s);
  }
  auto gang = VisibleGang(*caller, rpc::kCancelGang, request->gang_id());
  if (!gang.ok()) return FinishNow(context, gang.status());
  return RunAnsweringGang(
      *loop_, context,
      AuditedIfNotOwner(
          *caller, rpc::kCancelGang, **gang,
          [id = core::GangId(request->gang_id()), reason = request->reason()](
              core::Scheduler& s, absl::Time now) {
            return s.Cancel(id, reason, now).status();
          }),
      AfterOf(request->gang_id()), response);
}

grpc::ServerUnaryReactor* SchedulerService::GetGang(
    grpc::CallbackServerContext* context, const v1::GetGangRequest* request,
    v1::GetGangResponse* response) {
  auto caller = gate_->Admit(*context, rpc::kGetGang, request->gang_id());
  if (!caller.ok()) return FinishNow(context, caller.status());
  if (auto s = CheckId(*loop_, request->gang_id(), "gang_id"); !s.ok()) {
    return FinishNow(context, s);
  }
  std::shared_ptr<const View> view = loop_->view();
  auto gang = VisibleGang(*caller, rpc::kGetGang, request->gang_id(), *view);
  if (!gang.ok()) return FinishNow(context, gang.status());
  const bool plan_readable = PlanReadable();
  // A pending gang is read again on the loop, with its place in the plan
  // (a hash lookup there), so the two are of one instant.
  if (plan_readable && (*gang)->state == core::GangState::kPending) {
    std::shared_ptr<GangAfter> after = AfterOf(request->gang_id());
    after->gang = *gang;  // should the loop no longer have it
    after->plan.status = core::PlanStatus::kNotPending;
    // The plan is made when read (core::Scheduler::UpdatePlan).
    auto update_plan = [](core::Scheduler& s, absl::Time now) {
      s.UpdatePlan(now);
      return absl::OkStatus();
    };
    return RunAnsweringGang(*loop_, context, update_plan, std::move(after),
                            response,
                            /*mutates=*/false);
  }
  convert::ToProto(**gang, response->mutable_gang());
  if (plan_readable) MarkNotPending(response->mutable_gang());
  response->set_revision(view->revision);
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* SchedulerService::ListGangs(
    grpc::CallbackServerContext* context, const v1::ListGangsRequest* request,
    v1::ListGangsResponse* response) {
  auto caller = gate_->Admit(*context, rpc::kListGangs, request->queue());
  if (!caller.ok()) return FinishNow(context, caller.status());
  if (!request->queue().empty()) {
    if (auto s = CheckQueue(*caller, rpc::kListGangs, request->queue());
        !s.ok()) {
      return FinishNow(context, s);
    }
  }
  auto states = StatesFilter(*request);
  if (!states.ok()) return FinishNow(context, states.status());
  if (request->page_size() < 0 || request->page_size() > kMaxPageSize) {
    return FinishNow(context, absl::InvalidArgumentError(absl::StrCat(
                                  "page_size: must be in 0..", kMaxPageSize,
                                  " (0 = ", kDefaultPageSize, "), not ",
                                  request->page_size())));
  }
  const int limit =
      request->page_size() == 0 ? kDefaultPageSize : request->page_size();
  const std::string& queue = request->queue();
  const uint64_t filter = FilterFingerprint(queue, *states);
  // Later pages read the first page's view, pinned by its token.
  std::shared_ptr<const View> view;
  std::string after;
  if (request->page_token().empty()) {
    view = loop_->view();
  } else {
    auto token = DecodeToken(request->page_token());
    if (!token.ok()) return FinishNow(context, token.status());
    if (token->filter != filter) {
      return FinishNow(context,
                       absl::InvalidArgumentError(
                           "page_token: made for another queue or states "
                           "filter; pass the first page's filter"));
    }
    auto found = ListingView(token->revision);
    if (!found.ok()) return FinishNow(context, found.status());
    view = *std::move(found);
    after = std::move(token->after);
  }
  const bool scoped = caller->ScopedTo(Access::kGangRead);
  std::vector<core::GangPtr> gangs =
      view->gangs.List(after, limit + 1, [&](const core::Gang& gang) {
        return (queue.empty() || gang.spec.queue.value() == queue) &&
               (states->empty() || states->contains(gang.state)) &&
               (!scoped ||
                caller->AllowsQueue(Access::kGangRead, gang.spec.queue.value(),
                                    *view->queue_parents));
      });
  if (static_cast<int>(gangs.size()) > limit) {
    gangs.resize(limit);
    response->set_next_page_token(
        EncodeToken({view->revision, filter, gangs.back()->id.value()}));
    listings_.Pin(view, absl::Now());
  }
  for (const core::GangPtr& gang : gangs) {
    convert::ToProto(*gang, response->add_gangs());
  }
  response->set_revision(view->revision);
  return AnswerWithPlans(context, response);
}

grpc::ServerUnaryReactor* SchedulerService::AnswerWithPlans(
    grpc::CallbackServerContext* context, v1::ListGangsResponse* response) {
  if (!PlanReadable()) return FinishNow(context, absl::OkStatus());
  auto listed = std::make_shared<ListedPlans>();
  for (int i = 0; i < response->gangs_size(); ++i) {
    v1::Gang* gang = response->mutable_gangs(i);
    if (gang->state() != v1::GANG_STATE_PENDING) {
      MarkNotPending(gang);
      continue;
    }
    listed->index.push_back(i);
    listed->ids.emplace_back(gang->id());
  }
  if (listed->ids.empty()) return FinishNow(context, absl::OkStatus());
  ListedPlans* l = listed.get();
  // The plan is made when read (core::Scheduler::UpdatePlan).
  auto update_plan = [](core::Scheduler& s, absl::Time now) {
    s.UpdatePlan(now);
    return absl::OkStatus();
  };
  return RunOnLoop(
      *loop_, context, update_plan, /*mutates=*/false,
      [l](const core::Scheduler& s) {
        l->plans.reserve(l->ids.size());
        for (const core::GangId& id : l->ids) l->plans.push_back(s.PlanOf(id));
      },
      [l, response] {
        for (size_t i = 0; i < l->plans.size(); ++i) {
          convert::ToProto(l->plans[i], response->mutable_gangs(l->index[i]));
        }
      },
      std::move(listed));
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* SchedulerService::WatchGangs(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return Watch(context, *request, rpc::kWatchGangs, WatchFormat::kEvents);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* SchedulerService::WatchGangBatches(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return Watch(context, *request, rpc::kWatchGangBatches,
               WatchFormat::kBatches);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* SchedulerService::Watch(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer& request,
    const RpcMethod& method, WatchFormat format) {
  auto caller = gate_->Admit(*context, method);
  if (!caller.ok()) return hub_->Refuse(ToGrpc(caller.status()));
  WatchAccess access;
  access.context = context;
  if (const auth::Principal* p = caller->principal()) {
    access.principal = p->name;
    access.max_streams = p->watch_streams;
  }
  if (caller->ScopedTo(Access::kGangRead)) {
    // Checked per event against the queue tree in force, so a queue moved
    // out of the caller's subtree stops showing at once.
    access.scope = [caller = *caller, loop = loop_](const std::string& queue) {
      return caller.AllowsQueue(Access::kGangRead, queue,
                                *loop->view()->queue_parents);
    };
  }
  return hub_->Watch(request, std::move(access), format);
}

grpc::ServerUnaryReactor* SchedulerService::ReportGang(
    grpc::CallbackServerContext* context, const v1::ReportGangRequest* request,
    v1::ReportGangResponse* response) {
  auto caller = gate_->Admit(*context, rpc::kReportGang, request->gang_id());
  if (!caller.ok()) return FinishNow(context, caller.status());
  if (auto s = CheckId(*loop_, request->gang_id(), "gang_id"); !s.ok()) {
    return FinishNow(context, s);
  }
  auto gang = VisibleGang(*caller, rpc::kReportGang, request->gang_id());
  if (!gang.ok()) return FinishNow(context, gang.status());
  auto report = ReportFromProto(*request);
  if (!report.ok()) return FinishNow(context, report.status());
  return RunAnsweringGang(
      *loop_, context,
      AuditedIfNotOwner(
          *caller, rpc::kReportGang, **gang,
          [report = *std::move(report)](core::Scheduler& s, absl::Time now) {
            return s.Report(report, now).status();
          }),
      AfterOf(request->gang_id()), response);
}

grpc::ServerUnaryReactor* SchedulerService::RenewGangLease(
    grpc::CallbackServerContext* context,
    const v1::RenewGangLeaseRequest* request,
    v1::RenewGangLeaseResponse* response) {
  auto caller =
      gate_->Admit(*context, rpc::kRenewGangLease, request->gang_id());
  if (!caller.ok()) return FinishNow(context, caller.status());
  if (auto s = CheckId(*loop_, request->gang_id(), "gang_id"); !s.ok()) {
    return FinishNow(context, s);
  }
  auto gang = VisibleGang(*caller, rpc::kRenewGangLease, request->gang_id());
  if (!gang.ok()) return FinishNow(context, gang.status());
  return RunOnLoop(
      *loop_, context,
      AuditedIfNotOwner(
          *caller, rpc::kRenewGangLease, **gang,
          [id = core::GangId(request->gang_id()), response](
              core::Scheduler& s, absl::Time now) -> absl::Status {
            ASSIGN_OR_RETURN(core::GangPtr renewed, s.RenewLease(id, now));
            convert::ToProto(*renewed->lease_expire_time,
                             response->mutable_lease_expire_time());
            return absl::OkStatus();
          }),
      /*mutates=*/true, [response](const core::Scheduler& s) {
        response->set_revision(s.revision());
      });
}

grpc::ServerUnaryReactor* SchedulerService::ExplainGang(
    grpc::CallbackServerContext* context, const v1::ExplainGangRequest* request,
    v1::ExplainGangResponse* response) {
  auto caller = gate_->Admit(*context, rpc::kExplainGang, request->gang_id());
  if (!caller.ok()) return FinishNow(context, caller.status());
  if (auto s = CheckId(*loop_, request->gang_id(), "gang_id"); !s.ok()) {
    return FinishNow(context, s);
  }
  auto gang = VisibleGang(*caller, rpc::kExplainGang, request->gang_id());
  if (!gang.ok()) return FinishNow(context, gang.status());
  // Decided here: a follower (whose read-only scheduler makes no plan)
  // only ever becomes the leader, so a call it takes is at worst answered
  // by the new leader without the plan, never the other way round.
  const bool leading = !loop_->following();
  return RunOnLoop(
      *loop_, context,
      [id = core::GangId(request->gang_id()), response, leading](
          core::Scheduler& s, absl::Time now) -> absl::Status {
        if (leading) s.UpdatePlan(now);
        ASSIGN_OR_RETURN(core::Explanation explanation, s.Explain(id, now));
        FillExplanation(explanation, leading, response);
        response->set_revision(s.revision());
        return absl::OkStatus();
      },
      /*mutates=*/false);
}

void SchedulerService::FillExplanation(const core::Explanation& explanation,
                                       bool leading,
                                       v1::ExplainGangResponse* response) {
  convert::ToProto(*explanation.gang, response->mutable_gang());
  response->set_reason(explanation.reason);
  response->set_reason_code(convert::ToProto(explanation.reason_code));
  response->set_position(explanation.position);
  response->set_position_in_queue(explanation.position_in_queue);
  if (const auto& r = explanation.reservation) {
    response->set_reserved_domain(r->path.empty() ? "/" : r->path);
    if (r->start != absl::InfiniteFuture()) {
      convert::ToProto(r->start, response->mutable_estimated_start());
    }
  }
  if (!leading) return;
  convert::ToProto(explanation.plan, response->mutable_gang());
  if (response->gang().has_estimated_start()) {
    *response->mutable_estimated_start() = response->gang().estimated_start();
  }
}

grpc::ServerUnaryReactor* SchedulerService::DryRunGang(
    grpc::CallbackServerContext* context, const v1::DryRunGangRequest* request,
    v1::DryRunGangResponse* response) {
  auto caller =
      gate_->Admit(*context, rpc::kDryRunGang, request->spec().queue());
  if (!caller.ok()) return FinishNow(context, caller.status());
  if (auto s = CheckQueue(*caller, rpc::kDryRunGang, request->spec().queue());
      !s.ok()) {
    return FinishNow(context, s);
  }
  auto spec = convert::GangSpecFromProto(request->spec(), "spec");
  if (!spec.ok()) return FinishNow(context, spec.status());
  return RunOnLoop(
      *loop_, context,
      [spec = *std::move(spec), response](core::Scheduler& s,
                                          absl::Time) -> absl::Status {
        ASSIGN_OR_RETURN(core::PlacementResult result, s.DryRun(spec));
        response->set_fits(result.placed);
        response->set_reason(result.reason);
        if (!result.placed) {
          response->set_reason_code(convert::ToProto(result.code));
        }
        for (const core::PodPlacement& pod : result.pods) {
          convert::ToProto(pod, response->add_placement());
        }
        response->set_revision(s.revision());
        return absl::OkStatus();
      },
      /*mutates=*/false);
}

}  // namespace phalanx::server
