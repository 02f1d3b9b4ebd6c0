#include "proto/convert.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/validate.h"

namespace phalanx::convert {
namespace {

absl::Status BadEnum(absl::string_view field, int value) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": unknown value ", value));
}

std::optional<absl::Time> OptionalTime(bool has,
                                       const google::protobuf::Timestamp& ts) {
  if (!has) return std::nullopt;
  return FromProto(ts);
}

absl::StatusOr<core::TopologyMode> ModeFromProto(int value,
                                                 absl::string_view field) {
  switch (value) {
    case pb::TOPOLOGY_MODE_UNSPECIFIED:
    case pb::TOPOLOGY_MODE_UNCONSTRAINED:
      return core::TopologyMode::kUnconstrained;
    case pb::TOPOLOGY_MODE_PREFERRED:
      return core::TopologyMode::kPreferred;
    case pb::TOPOLOGY_MODE_REQUIRED:
      return core::TopologyMode::kRequired;
  }
  return BadEnum(field, value);
}

pb::TopologyMode ToProto(core::TopologyMode mode) {
  switch (mode) {
    case core::TopologyMode::kUnconstrained:
      return pb::TOPOLOGY_MODE_UNCONSTRAINED;
    case core::TopologyMode::kPreferred:
      return pb::TOPOLOGY_MODE_PREFERRED;
    case core::TopologyMode::kRequired:
      return pb::TOPOLOGY_MODE_REQUIRED;
  }
  return pb::TOPOLOGY_MODE_UNSPECIFIED;
}

absl::StatusOr<core::PodSetSpec> PodSetFromProto(const pb::PodSet& in,
                                                 const std::string& field) {
  core::PodSetSpec out;
  out.name = in.name();
  out.count = in.count();
  out.gpus = in.gpus();
  out.cpu_millis = in.cpu_millis();
  out.memory_bytes = in.memory_bytes();
  out.gpu_models.assign(in.gpu_models().begin(), in.gpu_models().end());
  ASSIGN_OR_RETURN(out.topology.mode, ModeFromProto(in.topology().mode(),
                                                    field + ".topology.mode"));
  out.topology.level = in.topology().level();
  out.slice.size = in.slice().size();
  out.slice.level = in.slice().level();
  out.group = in.group();
  out.min_count = in.min_count();
  return out;
}

absl::StatusOr<core::Ordering> OrderingFromProto(int value,
                                                 absl::string_view field) {
  switch (value) {
    case pb::ORDERING_UNSPECIFIED:
    case pb::ORDERING_PRIORITY_FAIR_SHARE_AGE:
      return core::Ordering::kPriorityFairShareAge;
    case pb::ORDERING_FAIR_SHARE_FIRST:
      return core::Ordering::kFairShareFirst;
    case pb::ORDERING_SUBMIT_ORDER:
      return core::Ordering::kSubmitOrder;
  }
  return BadEnum(field, value);
}

pb::Ordering ToProto(core::Ordering ordering) {
  return static_cast<pb::Ordering>(static_cast<int>(ordering) + 1);
}

}  // namespace

absl::Time FromProto(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

// Whole seconds (floored) and the nanoseconds past them: exact for every
// finite time, so what is stored reads back as it was (absl::ToUnixNanos
// saturates past the year 2262). The infinite times keep their seconds
// saturated with 999999999 nanoseconds.
void ToProto(absl::Time time, google::protobuf::Timestamp* out) {
  const int64_t seconds = absl::ToUnixSeconds(time);
  const absl::Duration rest = time - absl::FromUnixSeconds(seconds);
  out->set_seconds(seconds);
  out->set_nanos(rest < absl::Seconds(1)
                     ? static_cast<int32_t>(absl::ToInt64Nanoseconds(rest))
                     : 999'999'999);
}

absl::StatusOr<absl::Time> TimestampFromProto(
    const google::protobuf::Timestamp& ts, absl::string_view field) {
  constexpr int64_t kMinSeconds = -62'135'596'800;  // 0001-01-01T00:00:00Z
  constexpr int64_t kMaxSeconds = 253'402'300'799;  // 9999-12-31T23:59:59Z
  if (ts.seconds() < kMinSeconds || ts.seconds() > kMaxSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".seconds: ", ts.seconds(), " is outside years 1..9999 (",
        kMinSeconds, "..", kMaxSeconds, ")"));
  }
  if (ts.nanos() < 0 || ts.nanos() > 999'999'999) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".nanos: must be in 0..999999999, not ", ts.nanos()));
  }
  return FromProto(ts);
}

absl::StatusOr<absl::Duration> DurationFromProto(
    const google::protobuf::Duration& d, absl::string_view field) {
  constexpr int64_t kMaxSeconds = 315'576'000'000;  // 10000 years
  if (d.seconds() < -kMaxSeconds || d.seconds() > kMaxSeconds) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".seconds: must be in -", kMaxSeconds, "..",
                     kMaxSeconds, ", not ", d.seconds()));
  }
  if (d.nanos() < -999'999'999 || d.nanos() > 999'999'999) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".nanos: must be in -999999999..999999999, not ", d.nanos()));
  }
  if ((d.seconds() > 0 && d.nanos() < 0) ||
      (d.seconds() < 0 && d.nanos() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".nanos: must have the sign of seconds (",
                     d.seconds(), " s, ", d.nanos(), " ns)"));
  }
  return FromProto(d);
}

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

// Whole seconds (toward zero) and the nanoseconds past them, of the same
// sign: exact for every finite duration (absl::ToInt64Nanoseconds saturates
// past 292 years). The infinite durations keep their seconds saturated.
void ToProto(absl::Duration duration, google::protobuf::Duration* out) {
  const int64_t seconds = absl::ToInt64Seconds(duration);
  const absl::Duration rest = duration - absl::Seconds(seconds);
  int64_t nanos = 0;
  if (rest >= absl::Seconds(1)) {
    nanos = 999'999'999;
  } else if (rest <= absl::Seconds(-1)) {
    nanos = -999'999'999;
  } else {
    nanos = absl::ToInt64Nanoseconds(rest);
  }
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(nanos));
}

absl::StatusOr<core::GangState> GangStateFromProto(int value,
                                                   absl::string_view field) {
  switch (value) {
    case pb::GANG_STATE_PENDING:
      return core::GangState::kPending;
    case pb::GANG_STATE_ADMITTED:
      return core::GangState::kAdmitted;
    case pb::GANG_STATE_RUNNING:
      return core::GangState::kRunning;
    case pb::GANG_STATE_PREEMPTING:
      return core::GangState::kPreempting;
    case pb::GANG_STATE_SUCCEEDED:
      return core::GangState::kSucceeded;
    case pb::GANG_STATE_FAILED:
      return core::GangState::kFailed;
    case pb::GANG_STATE_CANCELLED:
      return core::GangState::kCancelled;
  }
  return BadEnum(field, value);
}

pb::GangState ToProto(core::GangState state) {
  return static_cast<pb::GangState>(static_cast<int>(state) + 1);
}

static_assert(pb::ReasonCode_ARRAYSIZE == core::kReasonCodeCount,
              "core::ReasonCode and phalanx.v1.ReasonCode list the same codes");

pb::ReasonCode ToProto(core::ReasonCode code) {
  return static_cast<pb::ReasonCode>(static_cast<int>(code));
}

core::ReasonCode ReasonCodeFromProto(int value) {
  if (value <= 0 || value >= core::kReasonCodeCount) {
    return core::ReasonCode::kNone;
  }
  return static_cast<core::ReasonCode>(value);
}

absl::StatusOr<core::NodeState> NodeStateFromProto(int value,
                                                   absl::string_view field) {
  switch (value) {
    case pb::NODE_STATE_READY:
      return core::NodeState::kReady;
    case pb::NODE_STATE_CORDONED:
      return core::NodeState::kCordoned;
    case pb::NODE_STATE_DRAINING:
      return core::NodeState::kDraining;
    case pb::NODE_STATE_UNHEALTHY:
      return core::NodeState::kUnhealthy;
  }
  return BadEnum(field, value);
}

pb::NodeState ToProto(core::NodeState state) {
  return static_cast<pb::NodeState>(static_cast<int>(state) + 1);
}

pb::EventType ToProto(core::EventType type) {
  return static_cast<pb::EventType>(static_cast<int>(type) + 1);
}

absl::StatusOr<core::GangSpec> GangSpecFromProto(const pb::GangSpec& in,
                                                 absl::string_view field) {
  core::GangSpec out;
  out.queue = core::QueueName(in.queue());
  out.priority = in.priority();
  out.labels.insert(in.labels().begin(), in.labels().end());
  out.request_id = in.request_id();
  ASSIGN_OR_RETURN(
      out.estimated_runtime,
      DurationFromProto(in.estimated_runtime(),
                        absl::StrCat(field, ".estimated_runtime")));
  ASSIGN_OR_RETURN(
      out.max_runtime,
      DurationFromProto(in.max_runtime(), absl::StrCat(field, ".max_runtime")));
  out.allow_mixed_models = in.allow_mixed_models();
  out.priority_class = in.priority_class();
  ASSIGN_OR_RETURN(out.lease_duration,
                   DurationFromProto(in.lease_duration(),
                                     absl::StrCat(field, ".lease_duration")));
  for (int i = 0; i < in.pod_sets_size(); ++i) {
    ASSIGN_OR_RETURN(
        core::PodSetSpec set,
        PodSetFromProto(in.pod_sets(i),
                        absl::StrCat(field, ".pod_sets[", i, "]")));
    out.pod_sets.push_back(std::move(set));
  }
  return out;
}

void ToProto(const core::GangSpec& in, pb::GangSpec* out) {
  out->set_queue(in.queue.value());
  out->set_priority(in.priority);
  out->mutable_labels()->insert(in.labels.begin(), in.labels.end());
  out->set_request_id(in.request_id);
  if (in.estimated_runtime != absl::ZeroDuration()) {
    ToProto(in.estimated_runtime, out->mutable_estimated_runtime());
  }
  if (in.max_runtime != absl::ZeroDuration()) {
    ToProto(in.max_runtime, out->mutable_max_runtime());
  }
  out->set_allow_mixed_models(in.allow_mixed_models);
  out->set_priority_class(in.priority_class);
  if (in.lease_duration != absl::ZeroDuration()) {
    ToProto(in.lease_duration, out->mutable_lease_duration());
  }
  for (const core::PodSetSpec& set : in.pod_sets) {
    pb::PodSet* p = out->add_pod_sets();
    p->set_name(set.name);
    p->set_count(set.count);
    p->set_gpus(set.gpus);
    p->set_cpu_millis(set.cpu_millis);
    p->set_memory_bytes(set.memory_bytes);
    for (const std::string& model : set.gpu_models) p->add_gpu_models(model);
    p->mutable_topology()->set_mode(ToProto(set.topology.mode));
    p->mutable_topology()->set_level(set.topology.level);
    if (set.slice.size != 0 || !set.slice.level.empty()) {
      p->mutable_slice()->set_size(set.slice.size);
      p->mutable_slice()->set_level(set.slice.level);
    }
    p->set_group(set.group);
    p->set_min_count(set.min_count);
  }
}

void ToProto(const core::PodPlacement& in, pb::PodPlacement* out) {
  out->set_pod_set(in.pod_set);
  out->set_index(in.index);
  out->set_node(in.node.value());
  for (int gpu : in.gpu_indices) out->add_gpu_indices(gpu);
}

void ToProto(const core::Gang& in, pb::Gang* out) {
  out->set_id(in.id.value());
  ToProto(in.spec, out->mutable_spec());
  out->set_state(ToProto(in.state));
  out->set_reason(in.reason);
  out->set_reason_code(ToProto(in.reason_code));
  ToProto(in.submit_time, out->mutable_submit_time());
  if (in.admit_time) ToProto(*in.admit_time, out->mutable_admit_time());
  if (in.finish_time) ToProto(*in.finish_time, out->mutable_finish_time());
  for (const core::PodPlacement& pod : in.placement) {
    ToProto(pod, out->add_placement());
  }
  out->set_revision(in.revision);
  out->set_attempts(in.attempts);
  out->set_preemptions(in.preemptions);
  out->set_shrink_to_count(in.shrink_to);
  out->set_on_loan(in.on_loan);
  out->set_resizes(in.resizes);
  if (in.last_resize_time) {
    ToProto(*in.last_resize_time, out->mutable_last_resize_time());
  }
  if (in.elastic_work_done != absl::ZeroDuration()) {
    ToProto(in.elastic_work_done, out->mutable_elastic_work_done());
  }
  if (in.first_admit_time) {
    ToProto(*in.first_admit_time, out->mutable_first_admit_time());
  }
  if (in.previous_run_time != absl::ZeroDuration()) {
    ToProto(in.previous_run_time, out->mutable_previous_run_time());
  }
  if (in.last_checkpoint_time) {
    ToProto(*in.last_checkpoint_time, out->mutable_last_checkpoint_time());
  }
  out->set_message(in.message);
  out->set_owner(in.owner);
  if (in.lease_expire_time) {
    ToProto(*in.lease_expire_time, out->mutable_lease_expire_time());
  }
  if (in.grace_deadline) {
    ToProto(*in.grace_deadline, out->mutable_grace_deadline());
  }
  out->set_placement_released(in.placement_released);
}

pb::PlanStatus ToProto(core::PlanStatus status) {
  switch (status) {
    case core::PlanStatus::kNotPending:
      return pb::PLAN_STATUS_NOT_PENDING;
    case core::PlanStatus::kUnplanned:
      return pb::PLAN_STATUS_UNPLANNED;
    case core::PlanStatus::kPlanned:
      return pb::PLAN_STATUS_PLANNED;
    case core::PlanStatus::kBeyondDepth:
      return pb::PLAN_STATUS_BEYOND_DEPTH;
    case core::PlanStatus::kBeyondWindow:
      return pb::PLAN_STATUS_BEYOND_WINDOW;
    case core::PlanStatus::kNeverFits:
      return pb::PLAN_STATUS_NEVER_FITS;
  }
  return pb::PLAN_STATUS_UNSPECIFIED;
}

void ToProto(const core::PlannedStart& in, pb::Gang* out) {
  out->set_plan_status(ToProto(in.status));
  if (in.status != core::PlanStatus::kPlanned) return;
  if (in.start != absl::InfiniteFuture()) {
    ToProto(in.start, out->mutable_estimated_start());
  }
  out->set_planned_domain(in.domain.empty() ? "/" : in.domain);
  out->set_plan_rank(in.rank);
}

absl::StatusOr<core::Gang> GangFromProto(const pb::Gang& in) {
  core::Gang out;
  out.id = core::GangId(in.id());
  ASSIGN_OR_RETURN(out.spec, GangSpecFromProto(in.spec(), "spec"));
  ASSIGN_OR_RETURN(out.state, GangStateFromProto(in.state(), "state"));
  out.reason = in.reason();
  out.reason_code = ReasonCodeFromProto(in.reason_code());
  out.submit_time = FromProto(in.submit_time());
  out.admit_time = OptionalTime(in.has_admit_time(), in.admit_time());
  out.finish_time = OptionalTime(in.has_finish_time(), in.finish_time());
  for (const pb::PodPlacement& pod : in.placement()) {
    out.placement.push_back(core::PodPlacement{
        pod.pod_set(),
        pod.index(),
        core::NodeId(pod.node()),
        {pod.gpu_indices().begin(), pod.gpu_indices().end()}});
  }
  out.revision = in.revision();
  out.attempts = in.attempts();
  out.preemptions = in.preemptions();
  out.shrink_to = in.shrink_to_count();
  out.on_loan = in.on_loan();
  out.resizes = in.resizes();
  out.last_resize_time =
      OptionalTime(in.has_last_resize_time(), in.last_resize_time());
  out.elastic_work_done = FromProto(in.elastic_work_done());
  out.first_admit_time =
      OptionalTime(in.has_first_admit_time(), in.first_admit_time());
  out.previous_run_time = FromProto(in.previous_run_time());
  out.last_checkpoint_time =
      OptionalTime(in.has_last_checkpoint_time(), in.last_checkpoint_time());
  out.message = in.message();
  out.owner = in.owner();
  out.lease_expire_time =
      OptionalTime(in.has_lease_expire_time(), in.lease_expire_time());
  out.grace_deadline =
      OptionalTime(in.has_grace_deadline(), in.grace_deadline());
  out.placement_released = in.placement_released();
  return out;
}

void ToProto(const core::Event& in, pb::GangEvent* out) {
  out->set_revision(in.revision);
  out->set_type(ToProto(in.type));
  ToProto(in.time, out->mutable_time());
  if (in.gang) ToProto(*in.gang, out->mutable_gang());
}

absl::StatusOr<core::Event> EventFromProto(const pb::GangEvent& in) {
  core::Event out;
  out.revision = in.revision();
  if (in.type() < pb::EVENT_TYPE_SUBMITTED ||
      in.type() > pb::EVENT_TYPE_RESIZED) {
    return BadEnum("type", in.type());
  }
  out.type = static_cast<core::EventType>(in.type() - 1);
  out.time = FromProto(in.time());
  if (in.has_gang()) {
    ASSIGN_OR_RETURN(core::Gang gang, GangFromProto(in.gang()));
    out.gang = std::make_shared<const core::Gang>(std::move(gang));
  }
  return out;
}

core::NodeStateSource NodeStateSourceFromProto(int value) {
  switch (value) {
    case pb::NODE_STATE_SOURCE_NODE_AGENT:
      return core::NodeStateSource::kNodeAgent;
    case pb::NODE_STATE_SOURCE_HEARTBEAT_TIMEOUT:
      return core::NodeStateSource::kHeartbeatTimeout;
    default:
      return core::NodeStateSource::kOperator;
  }
}

pb::NodeStateSource ToProto(core::NodeStateSource source) {
  switch (source) {
    case core::NodeStateSource::kOperator:
      return pb::NODE_STATE_SOURCE_OPERATOR;
    case core::NodeStateSource::kNodeAgent:
      return pb::NODE_STATE_SOURCE_NODE_AGENT;
    case core::NodeStateSource::kHeartbeatTimeout:
      return pb::NODE_STATE_SOURCE_HEARTBEAT_TIMEOUT;
  }
  return pb::NODE_STATE_SOURCE_UNSPECIFIED;
}

absl::StatusOr<core::Node> NodeFromProto(const pb::Node& in,
                                         absl::string_view field) {
  core::Node out;
  out.spec.id = core::NodeId(in.id());
  out.spec.gpu_model = in.gpu_model();
  out.spec.gpu_count = in.gpu_count();
  out.spec.cpu_millis = in.cpu_millis();
  out.spec.memory_bytes = in.memory_bytes();
  out.spec.labels.insert(in.labels().begin(), in.labels().end());
  // An address equal to the id is the default, kept as empty.
  if (in.address() != in.id()) out.spec.address = in.address();
  if (in.state() == pb::NODE_STATE_UNSPECIFIED) {
    out.state = core::NodeState::kReady;
  } else {
    ASSIGN_OR_RETURN(out.state, NodeStateFromProto(
                                    in.state(), absl::StrCat(field, ".state")));
  }
  out.state_source = NodeStateSourceFromProto(in.state_source());
  out.state_reason = in.state_reason();
  const std::vector<int> unhealthy_gpus(in.unhealthy_gpus().begin(),
                                        in.unhealthy_gpus().end());
  ASSIGN_OR_RETURN(out.unhealthy_gpu_mask,
                   core::GpuIndexMask(unhealthy_gpus, in.gpu_count(),
                                      absl::StrCat(field, ".unhealthy_gpus")));
  out.unhealthy_gpus_reason = in.unhealthy_gpus_reason();
  if (in.has_drain_deadline()) {
    ASSIGN_OR_RETURN(
        out.drain_deadline,
        TimestampFromProto(in.drain_deadline(),
                           absl::StrCat(field, ".drain_deadline")));
  }
  return out;
}

void ToProto(const core::Node& in, pb::Node* out) {
  out->set_id(in.spec.id.value());
  out->set_gpu_model(in.spec.gpu_model);
  out->set_gpu_count(in.spec.gpu_count);
  out->set_cpu_millis(in.spec.cpu_millis);
  out->set_memory_bytes(in.spec.memory_bytes);
  out->mutable_labels()->insert(in.spec.labels.begin(), in.spec.labels.end());
  out->set_address(in.spec.address.empty() ? in.spec.id.value()
                                           : in.spec.address);
  out->set_state(ToProto(in.state));
  out->set_state_source(ToProto(in.state_source));
  out->set_state_reason(in.state_reason);
  if (in.drain_deadline) {
    ToProto(*in.drain_deadline, out->mutable_drain_deadline());
  }
  for (int gpu = 0; gpu < 64; ++gpu) {
    if (in.unhealthy_gpu_mask >> gpu & 1) out->add_unhealthy_gpus(gpu);
  }
  out->set_unhealthy_gpus_reason(in.unhealthy_gpus_reason);
}

core::Queue QueueFromProto(const pb::Queue& in) {
  core::Queue out;
  out.name = core::QueueName(in.name());
  out.parent = core::QueueName(in.parent());
  out.weight = in.has_weight() ? in.weight() : 1.0;
  out.nominal_gpus.insert(in.nominal_gpus().begin(), in.nominal_gpus().end());
  out.borrowing_limit_gpus = in.borrowing_limit_gpus();
  out.lending_limit_gpus = in.lending_limit_gpus();
  out.held = in.held();
  if (in.has_max_priority()) out.max_priority = in.max_priority();
  return out;
}

void ToProto(const core::Queue& in, pb::Queue* out) {
  out->set_name(in.name.value());
  out->set_parent(in.parent.value());
  out->set_weight(in.weight);
  out->mutable_nominal_gpus()->insert(in.nominal_gpus.begin(),
                                      in.nominal_gpus.end());
  out->set_borrowing_limit_gpus(in.borrowing_limit_gpus);
  out->set_lending_limit_gpus(in.lending_limit_gpus);
  out->set_held(in.held);
  if (in.max_priority) out->set_max_priority(*in.max_priority);
}

absl::StatusOr<core::Config> ConfigFromProto(const pb::Config& in,
                                             absl::string_view field) {
  core::Config out;
  const std::string f(field);
  // Sets `*to` from a duration field that is set; unset keeps the default.
  auto duration = [&f](bool has, const google::protobuf::Duration& d,
                       absl::string_view path,
                       absl::Duration* to) -> absl::Status {
    if (!has) return absl::OkStatus();
    ASSIGN_OR_RETURN(*to, DurationFromProto(d, absl::StrCat(f, ".", path)));
    return absl::OkStatus();
  };
  out.topology_levels.assign(in.topology_levels().begin(),
                             in.topology_levels().end());
  RETURN_IF_ERROR(duration(in.has_cycle_interval(), in.cycle_interval(),
                           "cycle_interval", &out.cycle_interval));
  const pb::RetentionConfig& r = in.retention();
  if (r.finished_gangs() != 0)
    out.retention.finished_gangs = r.finished_gangs();
  RETURN_IF_ERROR(duration(r.has_finished_gang_age(), r.finished_gang_age(),
                           "retention.finished_gang_age",
                           &out.retention.finished_gang_age));
  if (r.events() != 0) out.retention.events = r.events();
  if (r.audit_records() != 0) out.retention.audit_records = r.audit_records();
  RETURN_IF_ERROR(duration(r.has_audit_age(), r.audit_age(),
                           "retention.audit_age", &out.retention.audit_age));
  RETURN_IF_ERROR(duration(
      in.watch().has_bookmark_interval(), in.watch().bookmark_interval(),
      "watch.bookmark_interval", &out.watch.bookmark_interval));
  if (in.watch().max_lag_events() != 0) {
    out.watch.max_lag_events = in.watch().max_lag_events();
  }
  RETURN_IF_ERROR(
      duration(in.idempotency().has_retention(), in.idempotency().retention(),
               "idempotency.retention", &out.idempotency_retention));
  RETURN_IF_ERROR(duration(in.node().has_heartbeat_timeout(),
                           in.node().heartbeat_timeout(),
                           "node.heartbeat_timeout", &out.heartbeat_timeout));
  RETURN_IF_ERROR(duration(in.node().has_startup_grace(),
                           in.node().startup_grace(), "node.startup_grace",
                           &out.startup_grace));
  ASSIGN_OR_RETURN(out.admission.ordering,
                   OrderingFromProto(in.admission().ordering(),
                                     absl::StrCat(f, ".admission.ordering")));
  out.admission.strict_fifo = in.admission().strict_fifo();
  out.admission.accept_unfit_gangs = in.admission().accept_unfit_gangs();
  if (in.admission().has_fair_share_first_below_priority()) {
    out.admission.fair_share_first_below_priority =
        in.admission().fair_share_first_below_priority();
  }
  if (in.admission().has_aging_per_hour()) {
    out.admission.aging_per_hour = in.admission().aging_per_hour();
  }
  if (in.admission().has_aging_max_levels()) {
    out.admission.aging_max_levels = in.admission().aging_max_levels();
  }
  if (in.admission().has_fair_share_size_credit()) {
    out.admission.fair_share_size_credit =
        in.admission().fair_share_size_credit();
  }
  if (in.admission().fair_share_wait_bound_disabled()) {
    out.admission.fair_share_wait_bound = absl::InfiniteDuration();
  } else {
    RETURN_IF_ERROR(duration(in.admission().has_fair_share_wait_bound(),
                             in.admission().fair_share_wait_bound(),
                             "admission.fair_share_wait_bound",
                             &out.admission.fair_share_wait_bound));
  }
  const pb::ReservationConfig& reservation = in.reservation();
  if (reservation.disabled()) {
    out.reservation.depth = 0;
  } else if (reservation.depth() != 0) {
    out.reservation.depth = reservation.depth();
  }
  out.reservation.min_priority = reservation.min_priority();
  RETURN_IF_ERROR(duration(reservation.has_after(), reservation.after(),
                           "reservation.after", &out.reservation.after));
  if (reservation.has_choose_by_stranding()) {
    out.reservation.choose_by_stranding = reservation.choose_by_stranding();
  }
  RETURN_IF_ERROR(duration(reservation.has_window(), reservation.window(),
                           "reservation.window", &out.reservation.window));
  if (reservation.has_max_takeovers()) {
    out.reservation.max_takeovers = reservation.max_takeovers();
  }
  if (reservation.has_for_quota_waits()) {
    out.reservation.for_quota_waits = reservation.for_quota_waits();
  }
  if (reservation.has_preemptible_backfill()) {
    out.reservation.preemptible_backfill = reservation.preemptible_backfill();
  }
  const pb::PlanningConfig& planning = in.planning();
  if (planning.has_max_gangs()) out.planning.max_gangs = planning.max_gangs();
  RETURN_IF_ERROR(duration(planning.has_window(), planning.window(),
                           "planning.window", &out.planning.window));
  RETURN_IF_ERROR(duration(planning.has_interval(), planning.interval(),
                           "planning.interval", &out.planning.interval));
  RETURN_IF_ERROR(
      duration(planning.has_default_runtime(), planning.default_runtime(),
               "planning.default_runtime", &out.planning.default_runtime));
  if (planning.has_binding()) out.planning.binding = planning.binding();
  RETURN_IF_ERROR(
      duration(in.elastic().has_grow_interval(), in.elastic().grow_interval(),
               "elastic.grow_interval", &out.elastic.grow_interval));
  out.placement.first_fit = in.placement().first_fit();
  if (in.placement().has_end_time_packing()) {
    out.placement.end_time_packing = in.placement().end_time_packing();
  }
  if (in.placement().has_fragmentation_scoring()) {
    out.placement.fragmentation_scoring =
        in.placement().fragmentation_scoring();
  }
  if (in.placement().has_domain_end_time_packing()) {
    out.placement.domain_end_time_packing =
        in.placement().domain_end_time_packing();
  }
  const pb::PreemptionConfig& preemption = in.preemption();
  if (preemption.has_enabled()) out.preemption.enabled = preemption.enabled();
  RETURN_IF_ERROR(duration(preemption.has_grace_period(),
                           preemption.grace_period(), "preemption.grace_period",
                           &out.preemption.grace_period));
  RETURN_IF_ERROR(duration(preemption.has_min_runtime(),
                           preemption.min_runtime(), "preemption.min_runtime",
                           &out.preemption.min_runtime));
  RETURN_IF_ERROR(duration(preemption.has_horizon(), preemption.horizon(),
                           "preemption.horizon", &out.preemption.horizon));
  if (preemption.has_min_preemptor_priority()) {
    out.preemption.min_preemptor_priority = preemption.min_preemptor_priority();
  }
  RETURN_IF_ERROR(
      duration(preemption.has_max_victim_loss(), preemption.max_victim_loss(),
               "preemption.max_victim_loss", &out.preemption.max_victim_loss));
  RETURN_IF_ERROR(duration(in.lifecycle().has_start_timeout(),
                           in.lifecycle().start_timeout(),
                           "lifecycle.start_timeout", &out.start_timeout));
  const pb::FairShareConfig& fs = in.fair_share();
  RETURN_IF_ERROR(duration(fs.has_half_life(), fs.half_life(),
                           "fair_share.half_life", &out.fair_share.half_life));
  RETURN_IF_ERROR(duration(fs.has_sample_interval(), fs.sample_interval(),
                           "fair_share.sample_interval",
                           &out.fair_share.sample_interval));
  out.fair_share.enabled = !fs.disabled();
  out.fair_share.decayed_usage_only = fs.decayed_usage_only();
  out.fair_share.model_weights.insert(fs.model_weights().begin(),
                                      fs.model_weights().end());
  out.priority_classes.insert(in.priority_classes().begin(),
                              in.priority_classes().end());
  // Limits: 0 keeps the default; ValidateConfig checks the ranges.
  const pb::LimitsConfig& l = in.limits();
  core::LimitsConfig& limits = out.limits;
  if (l.max_labels() != 0) limits.max_labels = l.max_labels();
  if (l.max_label_key_bytes() != 0) {
    limits.max_label_key_bytes = l.max_label_key_bytes();
  }
  if (l.max_label_value_bytes() != 0) {
    limits.max_label_value_bytes = l.max_label_value_bytes();
  }
  if (l.max_id_bytes() != 0) limits.max_id_bytes = l.max_id_bytes();
  if (l.max_message_bytes() != 0) {
    limits.max_message_bytes = l.max_message_bytes();
  }
  if (l.max_quota_gpus() != 0) limits.max_quota_gpus = l.max_quota_gpus();
  if (l.max_pending_gangs_per_queue() != 0) {
    limits.max_pending_gangs_per_queue = l.max_pending_gangs_per_queue();
  }
  if (l.requests_per_second() != 0) {
    limits.requests_per_second = l.requests_per_second();
  }
  if (l.request_burst() != 0) limits.request_burst = l.request_burst();
  if (l.watch_streams_per_principal() != 0) {
    limits.watch_streams_per_principal = l.watch_streams_per_principal();
  }
  if (l.watch_stream_buffer_bytes() != 0) {
    limits.watch_stream_buffer_bytes = l.watch_stream_buffer_bytes();
  }
  if (l.watch_total_buffer_bytes() != 0) {
    limits.watch_total_buffer_bytes = l.watch_total_buffer_bytes();
  }
  out.version = in.version();
  return out;
}

void ToProto(const core::Config& in, pb::Config* out) {
  for (const std::string& level : in.topology_levels) {
    out->add_topology_levels(level);
  }
  ToProto(in.cycle_interval, out->mutable_cycle_interval());
  out->mutable_retention()->set_finished_gangs(in.retention.finished_gangs);
  ToProto(in.retention.finished_gang_age,
          out->mutable_retention()->mutable_finished_gang_age());
  out->mutable_retention()->set_events(in.retention.events);
  out->mutable_retention()->set_audit_records(in.retention.audit_records);
  ToProto(in.retention.audit_age,
          out->mutable_retention()->mutable_audit_age());
  ToProto(in.watch.bookmark_interval,
          out->mutable_watch()->mutable_bookmark_interval());
  out->mutable_watch()->set_max_lag_events(in.watch.max_lag_events);
  ToProto(in.idempotency_retention,
          out->mutable_idempotency()->mutable_retention());
  ToProto(in.heartbeat_timeout,
          out->mutable_node()->mutable_heartbeat_timeout());
  ToProto(in.startup_grace, out->mutable_node()->mutable_startup_grace());
  out->mutable_admission()->set_ordering(ToProto(in.admission.ordering));
  out->mutable_admission()->set_strict_fifo(in.admission.strict_fifo);
  out->mutable_admission()->set_accept_unfit_gangs(
      in.admission.accept_unfit_gangs);
  out->mutable_admission()->set_fair_share_first_below_priority(
      in.admission.fair_share_first_below_priority);
  // Written only when on, so a default configuration reads as before.
  if (in.admission.aging_per_hour != 0) {
    out->mutable_admission()->set_aging_per_hour(in.admission.aging_per_hour);
    out->mutable_admission()->set_aging_max_levels(
        in.admission.aging_max_levels);
  }
  if (in.admission.fair_share_size_credit != 0) {
    out->mutable_admission()->set_fair_share_size_credit(
        in.admission.fair_share_size_credit);
  }
  if (in.admission.fair_share_wait_bound == absl::InfiniteDuration()) {
    out->mutable_admission()->set_fair_share_wait_bound_disabled(true);
  } else {
    ToProto(in.admission.fair_share_wait_bound,
            out->mutable_admission()->mutable_fair_share_wait_bound());
  }
  out->mutable_reservation()->set_depth(in.reservation.depth);
  out->mutable_reservation()->set_disabled(in.reservation.depth == 0);
  out->mutable_reservation()->set_min_priority(in.reservation.min_priority);
  if (in.reservation.after > absl::ZeroDuration()) {
    ToProto(in.reservation.after, out->mutable_reservation()->mutable_after());
  }
  out->mutable_reservation()->set_choose_by_stranding(
      in.reservation.choose_by_stranding);
  if (in.reservation.window > absl::ZeroDuration()) {
    ToProto(in.reservation.window,
            out->mutable_reservation()->mutable_window());
  }
  out->mutable_reservation()->set_max_takeovers(in.reservation.max_takeovers);
  out->mutable_reservation()->set_for_quota_waits(
      in.reservation.for_quota_waits);
  out->mutable_reservation()->set_preemptible_backfill(
      in.reservation.preemptible_backfill);
  pb::PlanningConfig* planning = out->mutable_planning();
  planning->set_max_gangs(in.planning.max_gangs);
  ToProto(in.planning.window, planning->mutable_window());
  ToProto(in.planning.interval, planning->mutable_interval());
  ToProto(in.planning.default_runtime, planning->mutable_default_runtime());
  planning->set_binding(in.planning.binding);
  ToProto(in.elastic.grow_interval,
          out->mutable_elastic()->mutable_grow_interval());
  out->mutable_placement()->set_first_fit(in.placement.first_fit);
  out->mutable_placement()->set_end_time_packing(in.placement.end_time_packing);
  out->mutable_placement()->set_fragmentation_scoring(
      in.placement.fragmentation_scoring);
  out->mutable_placement()->set_domain_end_time_packing(
      in.placement.domain_end_time_packing);
  out->mutable_preemption()->set_enabled(in.preemption.enabled);
  ToProto(in.preemption.grace_period,
          out->mutable_preemption()->mutable_grace_period());
  ToProto(in.preemption.min_runtime,
          out->mutable_preemption()->mutable_min_runtime());
  ToProto(in.preemption.horizon, out->mutable_preemption()->mutable_horizon());
  out->mutable_preemption()->set_min_preemptor_priority(
      in.preemption.min_preemptor_priority);
  if (in.preemption.max_victim_loss > absl::ZeroDuration()) {
    ToProto(in.preemption.max_victim_loss,
            out->mutable_preemption()->mutable_max_victim_loss());
  }
  ToProto(in.start_timeout, out->mutable_lifecycle()->mutable_start_timeout());
  ToProto(in.fair_share.half_life,
          out->mutable_fair_share()->mutable_half_life());
  ToProto(in.fair_share.sample_interval,
          out->mutable_fair_share()->mutable_sample_interval());
  out->mutable_fair_share()->set_disabled(!in.fair_share.enabled);
  out->mutable_fair_share()->set_decayed_usage_only(
      in.fair_share.decayed_usage_only);
  out->mutable_fair_share()->mutable_model_weights()->insert(
      in.fair_share.model_weights.begin(), in.fair_share.model_weights.end());
  out->mutable_priority_classes()->insert(in.priority_classes.begin(),
                                          in.priority_classes.end());
  pb::LimitsConfig* limits = out->mutable_limits();
  limits->set_max_labels(in.limits.max_labels);
  limits->set_max_label_key_bytes(in.limits.max_label_key_bytes);
  limits->set_max_label_value_bytes(in.limits.max_label_value_bytes);
  limits->set_max_id_bytes(in.limits.max_id_bytes);
  limits->set_max_message_bytes(in.limits.max_message_bytes);
  limits->set_max_quota_gpus(in.limits.max_quota_gpus);
  limits->set_max_pending_gangs_per_queue(
      in.limits.max_pending_gangs_per_queue);
  limits->set_requests_per_second(in.limits.requests_per_second);
  limits->set_request_burst(in.limits.request_burst);
  limits->set_watch_streams_per_principal(
      in.limits.watch_streams_per_principal);
  limits->set_watch_stream_buffer_bytes(in.limits.watch_stream_buffer_bytes);
  limits->set_watch_total_buffer_bytes(in.limits.watch_total_buffer_bytes);
  out->set_version(in.version);
}

core::RequestRecord RequestFromProto(const storage::v1::RequestRecord& in,
                                     const core::QueueName& queue,
                                     const std::string& request_id) {
  return core::RequestRecord{queue, request_id, core::GangId(in.gang_id()),
                             in.spec_fingerprint(), FromProto(in.expires())};
}

void ToProto(const core::RequestRecord& in, storage::v1::RequestRecord* out) {
  out->set_gang_id(in.gang_id.value());
  out->set_spec_fingerprint(in.spec_fingerprint);
  ToProto(in.expires, out->mutable_expires());
}

core::LedgerEntry LedgerFromProto(const storage::v1::LedgerRecord& in) {
  core::LedgerEntry out;
  out.usage.insert(in.usage().begin(), in.usage().end());
  out.updated = FromProto(in.updated());
  return out;
}

void ToProto(const core::LedgerEntry& in, storage::v1::LedgerRecord* out) {
  out->mutable_usage()->insert(in.usage.begin(), in.usage.end());
  ToProto(in.updated, out->mutable_updated());
}

core::Meta MetaFromProto(const storage::v1::MetaRecord& in) {
  return core::Meta{in.last_revision(), in.next_gang_seq(),
                    in.first_retained_revision()};
}

void ToProto(const core::Meta& in, storage::v1::MetaRecord* out) {
  out->set_schema_version(1);
  out->set_last_revision(in.last_revision);
  out->set_next_gang_seq(in.next_gang_seq);
  out->set_first_retained_revision(in.first_retained_revision);
}

core::StartupFileHashes StartupFilesFromProto(
    const storage::v1::StartupFilesRecord& in) {
  return core::StartupFileHashes{in.config_sha256(), in.fleet_sha256(),
                                 in.queues_sha256()};
}

void ToProto(const core::StartupFileHashes& in,
             storage::v1::StartupFilesRecord* out) {
  out->set_config_sha256(in.config);
  out->set_fleet_sha256(in.fleet);
  out->set_queues_sha256(in.queues);
}

void ToProto(const core::AuditRecord& in, pb::AuditRecord* out) {
  out->set_sequence(in.sequence);
  ToProto(in.time, out->mutable_time());
  out->set_principal(in.principal);
  out->set_method(in.method);
  out->set_target(in.target);
  out->set_outcome(in.outcome);
  out->set_summary(in.summary);
}

core::AuditRecord AuditFromProto(const pb::AuditRecord& in) {
  return core::AuditRecord{in.sequence(), FromProto(in.time()), in.principal(),
                           in.method(),   in.target(),          in.outcome(),
                           in.summary()};
}

}  // namespace phalanx::convert
