#include "clients/ctl_requests.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clients/ctl_declare.h"
#include "clients/ctl_format.h"
#include "google/protobuf/util/json_util.h"

namespace phalanx::ctl {
namespace {

absl::Status FlagError(absl::string_view flag, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", problem));
}

// Fails when -f and any of `given` (flag name, whether given) were both
// given.
absl::Status CheckFileAlone(
    const std::vector<std::pair<absl::string_view, bool>>& given) {
  for (const auto& [flag, was_given] : given) {
    if (was_given) {
      return absl::InvalidArgumentError(
          absl::StrFormat("-f cannot be combined with --%s", flag));
    }
  }
  return absl::OkStatus();
}

// Sets the pod set's topology from --level and --mode, if given.
absl::Status SetTopology(const SpecOptions& o, v1::PodSet* pod_set) {
  if (!o.level.has_value() && !o.mode.has_value()) return absl::OkStatus();
  const std::string level = o.level.value_or("");
  const v1::TopologyMode mode = o.mode.value_or(v1::TOPOLOGY_MODE_REQUIRED);
  if (level.empty() && mode != v1::TOPOLOGY_MODE_UNCONSTRAINED) {
    return FlagError("mode", "required and preferred need --level");
  }
  pod_set->mutable_topology()->set_mode(mode);
  pod_set->mutable_topology()->set_level(level);
  return absl::OkStatus();
}

// Sets the pod set's min_count from --min-pods, if given: at most --pods,
// and a multiple of --slice's size (the sizes an elastic gang takes).
absl::Status SetMinCount(const SpecOptions& o, v1::PodSet* pod_set) {
  if (!o.min_pods.has_value()) return absl::OkStatus();
  const int32_t min_pods = *o.min_pods;
  if (min_pods > pod_set->count()) {
    return FlagError("min-pods", absl::StrFormat("want at most --pods (%d), "
                                                 "got %d",
                                                 pod_set->count(), min_pods));
  }
  const int32_t step = o.slice.has_value() ? o.slice->size : 1;
  if (min_pods % step != 0) {
    return FlagError("min-pods",
                     absl::StrFormat("want a multiple of --slice's size (%d), "
                                     "got %d",
                                     step, min_pods));
  }
  pod_set->set_min_count(min_pods);
  return absl::OkStatus();
}

// Fills the one pod set from --pods, --gpus, --models, --slice, --level and
// --mode.
absl::Status FillPodSet(const SpecOptions& o, v1::PodSet* pod_set) {
  pod_set->set_name("workers");
  if (!o.pods.has_value() || !o.gpus.has_value()) {
    return absl::InvalidArgumentError(
        "flags --queue, --pods and --gpus are required (or use -f FILE)");
  }
  pod_set->set_count(*o.pods);
  pod_set->set_gpus(*o.gpus);
  for (const std::string& model :
       o.models.value_or(std::vector<std::string>{})) {
    pod_set->add_gpu_models(model);
  }
  if (o.slice.has_value()) {
    pod_set->mutable_slice()->set_size(o.slice->size);
    pod_set->mutable_slice()->set_level(o.slice->level);
  }
  if (absl::Status status = SetMinCount(o, pod_set); !status.ok()) {
    return status;
  }
  return SetTopology(o, pod_set);
}

// Fills priority, priority class, request id, name label and run times.
void FillSpecOptions(const SpecOptions& o, v1::GangSpec* spec) {
  if (o.priority.has_value()) spec->set_priority(*o.priority);
  spec->set_priority_class(o.priority_class.value_or(""));
  spec->set_request_id(o.request_id.value_or(""));
  if (o.name.has_value()) (*spec->mutable_labels())["name"] = *o.name;
  if (o.estimated_runtime.has_value()) {
    *spec->mutable_estimated_runtime() = ToProto(*o.estimated_runtime);
  }
  if (o.max_runtime.has_value()) {
    *spec->mutable_max_runtime() = ToProto(*o.max_runtime);
  }
}

absl::StatusOr<v1::Queue> QueueFromFlags(const QueuePutOptions& o) {
  v1::Queue queue;
  if (o.name.value_or("").empty()) {
    return absl::InvalidArgumentError(
        "flag --name is required (or use -f FILE)");
  }
  queue.set_name(*o.name);
  queue.set_parent(o.parent.value_or(""));
  if (o.nominal.has_value()) {
    queue.mutable_nominal_gpus()->insert(o.nominal->begin(), o.nominal->end());
  }
  if (o.weight.has_value()) queue.set_weight(*o.weight);
  if (o.held.has_value()) queue.set_held(*o.held);
  if (o.borrowing_limit.has_value()) {
    queue.set_borrowing_limit_gpus(*o.borrowing_limit);
  }
  if (o.lending_limit.has_value()) {
    queue.set_lending_limit_gpus(*o.lending_limit);
  }
  if (o.max_priority.has_value()) queue.set_max_priority(*o.max_priority);
  return queue;
}

// The time --checkpoint names: `now` for "now".
absl::Time CheckpointTime(
    const std::variant<ReportOptions::Now, absl::Time>& at, absl::Time now) {
  return std::holds_alternative<absl::Time>(at) ? std::get<absl::Time>(at)
                                                : now;
}

// The time --deadline names: a duration from `now`, or a time.
absl::Time DeadlineTime(const std::variant<absl::Duration, absl::Time>& at,
                        absl::Time now) {
  return std::holds_alternative<absl::Time>(at)
             ? std::get<absl::Time>(at)
             : now + std::get<absl::Duration>(at);
}

}  // namespace

absl::Status ParseJsonInto(absl::string_view text, absl::string_view what,
                           google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(
      std::string(text), message, options);
  if (status.ok()) return absl::OkStatus();
  const auto detail = status.message();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: not a valid %s in JSON: %s", what,
                      message->GetDescriptor()->full_name(),
                      std::string(detail.data(), detail.size())));
}

absl::StatusOr<v1::GangSpec> BuildSpec(const SpecOptions& options,
                                       absl::string_view file_text) {
  if (!options.file.has_value()) return SpecFromFlags(options);
  const SpecOptions& o = options;
  absl::Status status = CheckFileAlone({
      {"queue", o.queue.has_value()},
      {"pods", o.pods.has_value()},
      {"min-pods", o.min_pods.has_value()},
      {"gpus", o.gpus.has_value()},
      {"level", o.level.has_value()},
      {"mode", o.mode.has_value()},
      {"priority", o.priority.has_value()},
      {"priority-class", o.priority_class.has_value()},
      {"request-id", o.request_id.has_value()},
      {"name", o.name.has_value()},
      {"models", o.models.has_value()},
      {"slice", o.slice.has_value()},
      {"estimated-runtime", o.estimated_runtime.has_value()},
      {"max-runtime", o.max_runtime.has_value()},
  });
  if (!status.ok()) return status;
  return ParseJson<v1::GangSpec>(file_text, *options.file);
}

absl::StatusOr<v1::GangSpec> SpecFromFlags(const SpecOptions& options) {
  v1::GangSpec spec;
  if (options.queue.value_or("").empty()) {
    return absl::InvalidArgumentError(
        "flag --queue is required (or use -f FILE)");
  }
  spec.set_queue(*options.queue);
  absl::Status status = FillPodSet(options, spec.add_pod_sets());
  if (!status.ok()) return status;
  FillSpecOptions(options, &spec);
  return spec;
}

bool MatchesLabels(
    const LabelSelector& selector,
    const google::protobuf::Map<std::string, std::string>& labels) {
  return std::all_of(selector.begin(), selector.end(),
                     [&](const LabelRequirement& r) {
                       auto it = labels.find(r.key);
                       const bool set = it != labels.end();
                       switch (r.op) {
                         case LabelRequirement::Op::kEquals:
                           return set && it->second == r.value;
                         case LabelRequirement::Op::kNotEquals:
                           return !set || it->second != r.value;
                         case LabelRequirement::Op::kExists:
                           return set;
                         case LabelRequirement::Op::kNotExists:
                           return !set;
                       }
                       return false;
                     });
}

bool ListQuery::Matches(const v1::Gang& gang) const {
  if (!owner.empty() && gang.owner() != owner) return false;
  return MatchesLabels(labels, gang.spec().labels());
}

ListQuery BuildListQuery(const ListOptions& options) {
  ListQuery query;
  query.request.set_queue(options.queue);
  for (v1::GangState state : options.states) query.request.add_states(state);
  query.limit = options.limit.value_or(0);
  query.request.set_page_size(NextPageSize(query.limit, 0));
  query.owner = options.owner;
  query.labels = options.labels;
  return query;
}

ListQuery BuildCancelQuery(const LabelSelector& labels) {
  ListQuery query;
  for (v1::GangState state :
       {v1::GANG_STATE_PENDING, v1::GANG_STATE_ADMITTED, v1::GANG_STATE_RUNNING,
        v1::GANG_STATE_PREEMPTING}) {
    query.request.add_states(state);
  }
  query.request.set_page_size(NextPageSize(0, 0));
  query.labels = labels;
  return query;
}

int32_t NextPageSize(int64_t limit, int64_t fetched) {
  if (limit <= 0) return kMaxPageSize;
  return static_cast<int32_t>(
      std::clamp<int64_t>(limit - fetched, 0, kMaxPageSize));
}

v1::WatchGangsRequest BuildWatchRequest(const WatchOptions& options) {
  v1::WatchGangsRequest request;
  if (options.after_revision.has_value()) {
    request.set_after_revision(*options.after_revision);
  }
  for (const std::string& queue : options.queues) request.add_queues(queue);
  for (const std::string& gang : options.gangs) request.add_gang_ids(gang);
  return request;
}

absl::StatusOr<v1::ReportGangRequest> BuildReportRequest(
    absl::string_view gang_id, const ReportOptions& options, absl::Time now) {
  if (!options.state.has_value() && !options.checkpoint.has_value() &&
      !options.ack_preemption) {
    return absl::InvalidArgumentError(
        "give at least one of --state, --checkpoint and --ack-preemption");
  }
  v1::ReportGangRequest request;
  request.set_gang_id(std::string(gang_id));
  if (options.state.has_value()) request.set_state(*options.state);
  if (options.checkpoint.has_value()) {
    *request.mutable_last_checkpoint_time() =
        ToProto(CheckpointTime(*options.checkpoint, now));
  }
  request.set_preemption_acknowledged(options.ack_preemption);
  request.set_message(options.message);
  return request;
}

v1::ListNodesRequest BuildListNodesRequest(const NodesListOptions& options) {
  v1::ListNodesRequest request;
  if (options.state.has_value()) request.set_state(*options.state);
  request.set_gpu_model(options.model);
  return request;
}

absl::StatusOr<v1::SetNodeStateRequest> BuildSetNodeStateRequest(
    absl::string_view verb, absl::string_view node_id,
    const NodeStateOptions& options, absl::Time now) {
  v1::SetNodeStateRequest request;
  if (verb == "cordon") {
    request.set_state(v1::NODE_STATE_CORDONED);
  } else if (verb == "drain") {
    request.set_state(v1::NODE_STATE_DRAINING);
  } else if (verb == "uncordon") {
    request.set_state(v1::NODE_STATE_READY);
  } else if (verb == "unhealthy") {
    request.set_state(v1::NODE_STATE_UNHEALTHY);
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown node verb \"%s\"", verb));
  }
  request.set_node_id(std::string(node_id));
  request.set_reason(options.reason);
  if (options.deadline.has_value()) {
    *request.mutable_drain_deadline() =
        ToProto(DeadlineTime(*options.deadline, now));
  }
  return request;
}

absl::StatusOr<v1::Queue> BuildQueue(const QueuePutOptions& options,
                                     absl::string_view file_text) {
  if (!options.file.has_value()) return QueueFromFlags(options);
  const QueuePutOptions& o = options;
  absl::Status status = CheckFileAlone({
      {"name", o.name.has_value()},
      {"parent", o.parent.has_value()},
      {"weight", o.weight.has_value()},
      {"nominal", o.nominal.has_value()},
      {"held", o.held.has_value()},
      {"borrowing-limit", o.borrowing_limit.has_value()},
      {"lending-limit", o.lending_limit.has_value()},
      {"max-priority", o.max_priority.has_value()},
  });
  if (!status.ok()) return status;
  return ParseJson<v1::Queue>(file_text, *options.file);
}

absl::StatusOr<v1::PutQueueRequest> BuildQueueUpdate(
    absl::string_view name, const QueueSetOptions& options) {
  v1::PutQueueRequest request;
  request.mutable_queue()->set_name(std::string(name));
  if (options.held && options.no_held) {
    return FlagError("held", "give --held or --no-held, not both");
  }
  if (options.held || options.no_held) {
    request.mutable_queue()->set_held(options.held);
    request.mutable_update_mask()->add_paths("held");
  }
  if (options.weight.has_value()) {
    request.mutable_queue()->set_weight(*options.weight);
    request.mutable_update_mask()->add_paths("weight");
  }
  if (request.update_mask().paths_size() == 0) {
    return absl::InvalidArgumentError(
        "give what to change: --held, --no-held or --weight W");
  }
  return request;
}

absl::StatusOr<v1::UpdateConfigRequest> BuildUpdateConfigRequest(
    const ConfigSetOptions& options, absl::string_view file_text) {
  v1::UpdateConfigRequest request;
  absl::Status status =
      ParseJsonInto(file_text, options.file, request.mutable_config());
  if (!status.ok()) return status;
  if (options.expected_version.has_value()) {
    request.set_expected_version(*options.expected_version);
  }
  if (options.update_mask.has_value() && options.merge) {
    return FlagError("merge", "give --update-mask or --merge, not both");
  }
  if (options.update_mask.has_value()) {
    for (const std::string& path : *options.update_mask) {
      request.mutable_update_mask()->add_paths(path);
    }
  }
  if (options.merge) {
    absl::StatusOr<std::vector<std::string>> named =
        NamedFields(file_text, *v1::Config::descriptor(), options.file);
    if (!named.ok()) return named.status();
    for (const std::string& field : *named) {
      if (field != "version") request.mutable_update_mask()->add_paths(field);
    }
    if (request.update_mask().paths_size() == 0) {
      return FlagError("merge", "the file names no field to change");
    }
  }
  return request;
}

AuditQuery BuildAuditQuery(const AuditOptions& options) {
  AuditQuery query;
  query.all = options.all;
  if (options.page_size.has_value()) {
    query.request.set_page_size(*options.page_size);
  } else if (query.all) {
    query.request.set_page_size(kMaxAuditPageSize);
  }
  query.request.set_page_token(options.page_token);
  return query;
}

PageFollower::PageFollower(int max_pages) : max_pages_(max_pages) {}

PageFollower::Next PageFollower::After(const std::string& next_page_token,
                                       bool page_empty) {
  ++pages_;
  if (next_page_token.empty()) return Next::kDone;
  if (!seen_.insert(next_page_token).second || page_empty) {
    return Next::kNoProgress;
  }
  if (pages_ >= max_pages_) return Next::kPageLimit;
  return Next::kFetch;
}

}  // namespace phalanx::ctl
