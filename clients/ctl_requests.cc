#include "clients/ctl_requests.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "clients/ctl_format.h"
#include "google/protobuf/util/json_util.h"

namespace phalanx::ctl {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

absl::Status FlagError(absl::string_view flag, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", problem));
}

// The integer value of flag `name`, which must lie in [min, max].
absl::StatusOr<int64_t> IntFlag(const FlagValues& flags, absl::string_view name,
                                int64_t min, int64_t max) {
  const std::string text = flags.Get(name);
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
    return FlagError(name, absl::StrFormat("want an integer in [%d, %d], got "
                                           "\"%s\"",
                                           min, max, text));
  }
  return value;
}

// The value of the required flag `name`; fails when missing or empty.
absl::StatusOr<std::string> RequiredFlag(const FlagValues& flags,
                                         absl::string_view name) {
  std::string value = flags.Get(name);
  if (value.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("flag --%s is required (or use -f FILE)", name));
  }
  return value;
}

// Fails when --file and any of `others` were both given.
absl::Status CheckFileAlone(const FlagValues& flags,
                            const std::vector<absl::string_view>& others) {
  for (absl::string_view other : others) {
    if (flags.Has(other)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("-f cannot be combined with --%s", other));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::TopologyMode> ParseMode(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "required") return v1::TOPOLOGY_MODE_REQUIRED;
  if (lower == "preferred") return v1::TOPOLOGY_MODE_PREFERRED;
  if (lower == "unconstrained") return v1::TOPOLOGY_MODE_UNCONSTRAINED;
  return FlagError("mode", absl::StrFormat("want required, preferred or "
                                           "unconstrained, got \"%s\"",
                                           text));
}

// Sets the pod set's topology from --level and --mode, if given.
absl::Status SetTopology(const FlagValues& flags, v1::PodSet* pod_set) {
  if (!flags.Has("level") && !flags.Has("mode")) return absl::OkStatus();
  const std::string level = flags.Get("level");
  v1::TopologyMode mode = v1::TOPOLOGY_MODE_REQUIRED;
  if (flags.Has("mode")) {
    absl::StatusOr<v1::TopologyMode> parsed = ParseMode(flags.Get("mode"));
    if (!parsed.ok()) return parsed.status();
    mode = *parsed;
  }
  if (level.empty() && mode != v1::TOPOLOGY_MODE_UNCONSTRAINED) {
    return FlagError("mode", "required and preferred need --level");
  }
  pod_set->mutable_topology()->set_mode(mode);
  pod_set->mutable_topology()->set_level(level);
  return absl::OkStatus();
}

// Sets the pod set's slices from --slice SIZE@LEVEL, if given.
absl::Status SetSlice(const FlagValues& flags, v1::PodSet* pod_set) {
  if (!flags.Has("slice")) return absl::OkStatus();
  const std::string text = flags.Get("slice");
  const std::vector<std::string> parts = absl::StrSplit(text, '@');
  int size = 0;
  if (parts.size() != 2 || parts[1].empty() ||
      !absl::SimpleAtoi(parts[0], &size) || size < 1) {
    return FlagError("slice", absl::StrFormat("want SIZE@LEVEL with SIZE >= "
                                              "1, e.g. 18@nvl, got \"%s\"",
                                              text));
  }
  pod_set->mutable_slice()->set_size(size);
  pod_set->mutable_slice()->set_level(parts[1]);
  return absl::OkStatus();
}

// Fills the one pod set from --pods, --gpus, --models, --slice, --level and
// --mode.
absl::Status FillPodSet(const FlagValues& flags, v1::PodSet* pod_set) {
  pod_set->set_name("workers");
  if (!flags.Has("pods") || !flags.Has("gpus")) {
    return absl::InvalidArgumentError(
        "flags --queue, --pods and --gpus are required (or use -f FILE)");
  }
  absl::StatusOr<int64_t> pods = IntFlag(flags, "pods", 1, kInt32Max);
  if (!pods.ok()) return pods.status();
  absl::StatusOr<int64_t> gpus = IntFlag(flags, "gpus", 0, kInt32Max);
  if (!gpus.ok()) return gpus.status();
  pod_set->set_count(static_cast<int32_t>(*pods));
  pod_set->set_gpus(static_cast<int32_t>(*gpus));
  for (const std::string& model : flags.GetList("models")) {
    pod_set->add_gpu_models(model);
  }
  absl::Status status = SetSlice(flags, pod_set);
  if (!status.ok()) return status;
  return SetTopology(flags, pod_set);
}

// Sets the spec's Duration `field` from the flag `name`, if given.
absl::Status SetDuration(const FlagValues& flags, absl::string_view name,
                         google::protobuf::Duration* (v1::GangSpec::*field)(),
                         v1::GangSpec* spec) {
  if (!flags.Has(name)) return absl::OkStatus();
  absl::StatusOr<absl::Duration> duration =
      ParseDurationFlag(name, flags.Get(name));
  if (!duration.ok()) return duration.status();
  *(spec->*field)() = ToProto(*duration);
  return absl::OkStatus();
}

// Fills priority, priority class, request id, name label and run times.
absl::Status FillSpecOptions(const FlagValues& flags, v1::GangSpec* spec) {
  if (flags.Has("priority")) {
    absl::StatusOr<int64_t> priority =
        IntFlag(flags, "priority", kInt32Min, kInt32Max);
    if (!priority.ok()) return priority.status();
    spec->set_priority(static_cast<int32_t>(*priority));
  }
  spec->set_priority_class(flags.Get("priority-class"));
  spec->set_request_id(flags.Get("request-id"));
  if (flags.Has("name")) (*spec->mutable_labels())["name"] = flags.Get("name");
  absl::Status status =
      SetDuration(flags, "estimated-runtime",
                  &v1::GangSpec::mutable_estimated_runtime, spec);
  if (!status.ok()) return status;
  return SetDuration(flags, "max-runtime", &v1::GangSpec::mutable_max_runtime,
                     spec);
}

// Parses "NAME" or "PREFIX_NAME" (any case) with the enum's Parse function.
template <typename Enum, typename ParseFn>
absl::StatusOr<Enum> ParseEnumName(absl::string_view flag,
                                   absl::string_view text,
                                   absl::string_view prefix, ParseFn parse) {
  std::string upper = absl::AsciiStrToUpper(text);
  if (!absl::StartsWith(upper, prefix)) upper = absl::StrCat(prefix, upper);
  Enum value{};
  if (!parse(upper, &value) || static_cast<int>(value) == 0) {
    return FlagError(flag, absl::StrFormat("unknown state \"%s\"", text));
  }
  return value;
}

absl::StatusOr<std::map<std::string, int64_t>> ParseNominal(
    const FlagValues& flags) {
  std::map<std::string, int64_t> out;
  for (const std::string& item : flags.GetList("nominal")) {
    std::vector<std::string> parts = absl::StrSplit(item, '=');
    int64_t gpus = 0;
    if (parts.size() != 2 || parts[0].empty() ||
        !absl::SimpleAtoi(parts[1], &gpus) || gpus < 0) {
      return FlagError("nominal",
                       absl::StrFormat("want MODEL=GPUS, got \"%s\"", item));
    }
    out[parts[0]] = gpus;
  }
  return out;
}

// Sets the queue's optional numeric and boolean fields from flags.
absl::Status FillQueueOptions(const FlagValues& flags, v1::Queue* queue) {
  if (flags.Has("weight")) {
    double weight = 0;
    if (!absl::SimpleAtod(flags.Get("weight"), &weight) ||
        !std::isfinite(weight) || weight < 0) {
      return FlagError("weight", absl::StrFormat("want a number >= 0, got "
                                                 "\"%s\"",
                                                 flags.Get("weight")));
    }
    queue->set_weight(weight);
  }
  if (flags.Has("held")) {
    const std::string held = absl::AsciiStrToLower(flags.Get("held"));
    if (held != "true" && held != "false") {
      return FlagError("held", "want true or false");
    }
    queue->set_held(held == "true");
  }
  for (absl::string_view name : {"borrowing-limit", "lending-limit"}) {
    if (!flags.Has(name)) continue;
    absl::StatusOr<int64_t> limit = IntFlag(flags, name, -1, kInt64Max);
    if (!limit.ok()) return limit.status();
    if (name == "borrowing-limit") queue->set_borrowing_limit_gpus(*limit);
    if (name == "lending-limit") queue->set_lending_limit_gpus(*limit);
  }
  if (flags.Has("max-priority")) {
    absl::StatusOr<int64_t> max =
        IntFlag(flags, "max-priority", kInt32Min, kInt32Max);
    if (!max.ok()) return max.status();
    queue->set_max_priority(static_cast<int32_t>(*max));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Queue> QueueFromFlags(const FlagValues& flags) {
  v1::Queue queue;
  absl::StatusOr<std::string> name = RequiredFlag(flags, "name");
  if (!name.ok()) return name.status();
  queue.set_name(*name);
  queue.set_parent(flags.Get("parent"));
  absl::StatusOr<std::map<std::string, int64_t>> nominal = ParseNominal(flags);
  if (!nominal.ok()) return nominal.status();
  queue.mutable_nominal_gpus()->insert(nominal->begin(), nominal->end());
  absl::Status status = FillQueueOptions(flags, &queue);
  if (!status.ok()) return status;
  return queue;
}

absl::StatusOr<absl::Time> ParseCheckpoint(absl::string_view text,
                                           absl::Time now) {
  if (absl::AsciiStrToLower(text) == "now") return now;
  absl::Time time;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, text, &time, &error)) {
    return FlagError(
        "checkpoint",
        absl::StrFormat("want now or an RFC3339 time, got \"%s\"", text));
  }
  return time;
}

// A drain deadline: a positive duration from `now`, or an RFC3339 time.
absl::StatusOr<absl::Time> ParseDeadline(absl::string_view text,
                                         absl::Time now) {
  absl::Time time;
  std::string error;
  if (absl::ParseTime(absl::RFC3339_full, text, &time, &error)) return time;
  absl::StatusOr<absl::Duration> after = ParseDurationFlag("deadline", text);
  if (!after.ok()) {
    return FlagError(
        "deadline",
        absl::StrFormat("want a duration such as 90m or an RFC3339 time, "
                        "got \"%s\"",
                        text));
  }
  return now + *after;
}

absl::StatusOr<v1::GangState> ParseReportState(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "running") return v1::GANG_STATE_RUNNING;
  if (lower == "succeeded") return v1::GANG_STATE_SUCCEEDED;
  if (lower == "failed") return v1::GANG_STATE_FAILED;
  return FlagError("state", absl::StrFormat("want running, succeeded or "
                                            "failed, got \"%s\"",
                                            text));
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

absl::StatusOr<absl::Duration> ParseDurationFlag(absl::string_view flag,
                                                 absl::string_view text) {
  absl::Duration duration = absl::ZeroDuration();
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds)) {
    if (std::isfinite(seconds)) duration = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, &duration)) {
    duration = absl::ZeroDuration();
  }
  if (duration <= absl::ZeroDuration() ||
      duration == absl::InfiniteDuration()) {
    return FlagError(flag, absl::StrFormat("want a positive duration such as "
                                           "3600s or 90m, got \"%s\"",
                                           text));
  }
  return duration;
}

absl::StatusOr<std::vector<v1::GangState>> ParseGangStates(
    const std::vector<std::string>& names) {
  std::vector<v1::GangState> states;
  for (const std::string& name : names) {
    absl::StatusOr<v1::GangState> state = ParseEnumName<v1::GangState>(
        "state", name, "GANG_STATE_", &v1::GangState_Parse);
    if (!state.ok()) return state.status();
    states.push_back(*state);
  }
  return states;
}

absl::StatusOr<v1::NodeState> ParseNodeState(absl::string_view name) {
  return ParseEnumName<v1::NodeState>("state", name, "NODE_STATE_",
                                      &v1::NodeState_Parse);
}

absl::StatusOr<v1::GangSpec> BuildSpec(const FlagValues& flags,
                                       absl::string_view file_text) {
  if (!flags.Has("file")) return SpecFromFlags(flags);
  absl::Status status = CheckFileAlone(
      flags, {"queue", "pods", "gpus", "level", "mode", "priority",
              "priority-class", "request-id", "name", "models", "slice",
              "estimated-runtime", "max-runtime"});
  if (!status.ok()) return status;
  return ParseJson<v1::GangSpec>(file_text, flags.Get("file"));
}

absl::StatusOr<v1::GangSpec> SpecFromFlags(const FlagValues& flags) {
  v1::GangSpec spec;
  absl::StatusOr<std::string> queue = RequiredFlag(flags, "queue");
  if (!queue.ok()) return queue.status();
  spec.set_queue(*queue);
  absl::Status status = FillPodSet(flags, spec.add_pod_sets());
  if (!status.ok()) return status;
  status = FillSpecOptions(flags, &spec);
  if (!status.ok()) return status;
  return spec;
}

absl::StatusOr<ListQuery> BuildListQuery(const FlagValues& flags) {
  ListQuery query;
  query.request.set_queue(flags.Get("queue"));
  absl::StatusOr<std::vector<v1::GangState>> states =
      ParseGangStates(flags.GetList("state"));
  if (!states.ok()) return states.status();
  for (v1::GangState state : *states) query.request.add_states(state);
  if (flags.Has("limit")) {
    absl::StatusOr<int64_t> limit = IntFlag(flags, "limit", 1, kInt64Max);
    if (!limit.ok()) return limit.status();
    query.limit = *limit;
  }
  query.request.set_page_size(NextPageSize(query.limit, 0));
  return query;
}

int32_t NextPageSize(int64_t limit, int64_t fetched) {
  if (limit <= 0) return kMaxPageSize;
  return static_cast<int32_t>(
      std::clamp<int64_t>(limit - fetched, 0, kMaxPageSize));
}

absl::StatusOr<v1::WatchGangsRequest> BuildWatchRequest(
    const FlagValues& flags) {
  v1::WatchGangsRequest request;
  if (flags.Has("after")) {
    absl::StatusOr<int64_t> after = IntFlag(flags, "after", 0, kInt64Max);
    if (!after.ok()) return after.status();
    request.set_after_revision(*after);
  }
  for (const std::string& queue : flags.GetList("queue")) {
    request.add_queues(queue);
  }
  for (const std::string& gang : flags.GetList("gang")) {
    request.add_gang_ids(gang);
  }
  return request;
}

absl::StatusOr<v1::ReportGangRequest> BuildReportRequest(
    absl::string_view gang_id, const FlagValues& flags, absl::Time now) {
  if (!flags.Has("state") && !flags.Has("checkpoint") &&
      !flags.Has("ack-preemption")) {
    return absl::InvalidArgumentError(
        "give at least one of --state, --checkpoint and --ack-preemption");
  }
  v1::ReportGangRequest request;
  request.set_gang_id(std::string(gang_id));
  if (flags.Has("state")) {
    absl::StatusOr<v1::GangState> state = ParseReportState(flags.Get("state"));
    if (!state.ok()) return state.status();
    request.set_state(*state);
  }
  if (flags.Has("checkpoint")) {
    absl::StatusOr<absl::Time> time =
        ParseCheckpoint(flags.Get("checkpoint"), now);
    if (!time.ok()) return time.status();
    *request.mutable_last_checkpoint_time() = ToProto(*time);
  }
  request.set_preemption_acknowledged(flags.Get("ack-preemption") == "true");
  request.set_message(flags.Get("message"));
  return request;
}

absl::StatusOr<v1::ListNodesRequest> BuildListNodesRequest(
    const FlagValues& flags) {
  v1::ListNodesRequest request;
  if (flags.Has("state")) {
    absl::StatusOr<v1::NodeState> state = ParseNodeState(flags.Get("state"));
    if (!state.ok()) return state.status();
    request.set_state(*state);
  }
  request.set_gpu_model(flags.Get("model"));
  return request;
}

absl::StatusOr<v1::SetNodeStateRequest> BuildSetNodeStateRequest(
    absl::string_view verb, absl::string_view node_id, const FlagValues& flags,
    absl::Time now) {
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
  request.set_reason(flags.Get("reason"));
  if (flags.Has("deadline")) {
    absl::StatusOr<absl::Time> deadline =
        ParseDeadline(flags.Get("deadline"), now);
    if (!deadline.ok()) return deadline.status();
    *request.mutable_drain_deadline() = ToProto(*deadline);
  }
  return request;
}

absl::StatusOr<v1::Queue> BuildQueue(const FlagValues& flags,
                                     absl::string_view file_text) {
  if (!flags.Has("file")) return QueueFromFlags(flags);
  absl::Status status = CheckFileAlone(
      flags, {"name", "parent", "weight", "nominal", "held", "borrowing-limit",
              "lending-limit", "max-priority"});
  if (!status.ok()) return status;
  return ParseJson<v1::Queue>(file_text, flags.Get("file"));
}

absl::StatusOr<v1::PutQueueRequest> BuildQueueUpdate(absl::string_view name,
                                                     const FlagValues& flags) {
  v1::PutQueueRequest request;
  request.mutable_queue()->set_name(std::string(name));
  if (flags.Has("held") && flags.Has("no-held")) {
    return FlagError("held", "give --held or --no-held, not both");
  }
  if (flags.Has("held") || flags.Has("no-held")) {
    request.mutable_queue()->set_held(flags.Has("held"));
    request.mutable_update_mask()->add_paths("held");
  }
  if (flags.Has("weight")) {
    FlagValues weight_only;
    weight_only.Add("weight", flags.Get("weight"));
    absl::Status status =
        FillQueueOptions(weight_only, request.mutable_queue());
    if (!status.ok()) return status;
    request.mutable_update_mask()->add_paths("weight");
  }
  if (request.update_mask().paths_size() == 0) {
    return absl::InvalidArgumentError(
        "give what to change: --held, --no-held or --weight W");
  }
  return request;
}

absl::StatusOr<v1::UpdateConfigRequest> BuildUpdateConfigRequest(
    const FlagValues& flags, absl::string_view file_text) {
  v1::UpdateConfigRequest request;
  absl::Status status =
      ParseJsonInto(file_text, flags.Get("file"), request.mutable_config());
  if (!status.ok()) return status;
  if (flags.Has("expected-version")) {
    absl::StatusOr<int64_t> version =
        IntFlag(flags, "expected-version", 0, kInt64Max);
    if (!version.ok()) return version.status();
    request.set_expected_version(*version);
  }
  return request;
}

absl::StatusOr<AuditQuery> BuildAuditQuery(const FlagValues& flags) {
  AuditQuery query;
  query.all = flags.Get("all") == "true";
  if (flags.Has("page-size")) {
    absl::StatusOr<int64_t> size =
        IntFlag(flags, "page-size", 1, kMaxAuditPageSize);
    if (!size.ok()) return size.status();
    query.request.set_page_size(static_cast<int32_t>(*size));
  } else if (query.all) {
    query.request.set_page_size(kMaxAuditPageSize);
  }
  query.request.set_page_token(flags.Get("page-token"));
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
