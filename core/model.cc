#include "core/model.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace phalanx::core {

int GangSpec::TotalPods() const {
  int total = 0;
  for (const PodSetSpec& set : pod_sets) total += set.count;
  return total;
}

int64_t GangSpec::TotalGpus() const {
  int64_t total = 0;
  for (const PodSetSpec& set : pod_sets) {
    total += static_cast<int64_t>(set.count) * set.gpus;
  }
  return total;
}

bool IsFinal(GangState state) {
  return state == GangState::kSucceeded || state == GangState::kFailed ||
         state == GangState::kCancelled;
}

bool HoldsCapacity(GangState state) {
  return state == GangState::kAdmitted || state == GangState::kRunning ||
         state == GangState::kPreempting;
}

const char* GangStateName(GangState state) {
  switch (state) {
    case GangState::kPending:
      return "PENDING";
    case GangState::kAdmitted:
      return "ADMITTED";
    case GangState::kRunning:
      return "RUNNING";
    case GangState::kPreempting:
      return "PREEMPTING";
    case GangState::kSucceeded:
      return "SUCCEEDED";
    case GangState::kFailed:
      return "FAILED";
    case GangState::kCancelled:
      return "CANCELLED";
  }
  return "UNKNOWN";
}

const char* NodeStateName(NodeState state) {
  switch (state) {
    case NodeState::kReady:
      return "READY";
    case NodeState::kCordoned:
      return "CORDONED";
    case NodeState::kDraining:
      return "DRAINING";
    case NodeState::kUnhealthy:
      return "UNHEALTHY";
  }
  return "UNKNOWN";
}

const char* NodeStateSourceName(NodeStateSource source) {
  switch (source) {
    case NodeStateSource::kOperator:
      return "OPERATOR";
    case NodeStateSource::kNodeAgent:
      return "NODE_AGENT";
    case NodeStateSource::kHeartbeatTimeout:
      return "HEARTBEAT_TIMEOUT";
  }
  return "UNKNOWN";
}

const char* EventTypeName(EventType type) {
  static constexpr const char* kNames[] = {
      "SUBMITTED", "ADMITTED", "RUNNING",      "SUCCEEDED", "FAILED",
      "CANCELLED", "REQUEUED", "PREEMPTING",   "EVICTED",   "REPAIRED",
      "RESERVED",  "BOOKMARK", "CHECKPOINTED", "RESIZED"};
  return kNames[static_cast<int>(type)];
}

namespace {

// Appends a length-prefixed field so that no two specs encode alike.
void Put(std::string& out, absl::string_view field) {
  absl::StrAppend(&out, field.size(), ":", field, ";");
}

void Put(std::string& out, int64_t value) { absl::StrAppend(&out, value, ";"); }

std::string CanonicalSpec(const GangSpec& spec) {
  std::string out;
  Put(out, spec.queue.value());
  Put(out, spec.priority);
  Put(out, static_cast<int64_t>(spec.labels.size()));
  for (const auto& [key, value] : spec.labels) {
    Put(out, key);
    Put(out, value);
  }
  Put(out, spec.request_id);
  Put(out, absl::ToInt64Milliseconds(spec.estimated_runtime));
  Put(out, absl::ToInt64Milliseconds(spec.max_runtime));
  Put(out, spec.allow_mixed_models ? 1 : 0);
  Put(out, static_cast<int64_t>(spec.pod_sets.size()));
  for (const PodSetSpec& set : spec.pod_sets) {
    Put(out, set.name);
    Put(out, set.count);
    Put(out, set.gpus);
    Put(out, set.cpu_millis);
    Put(out, set.memory_bytes);
    Put(out, static_cast<int64_t>(set.gpu_models.size()));
    for (const std::string& model : set.gpu_models) Put(out, model);
    Put(out, static_cast<int64_t>(set.topology.mode));
    Put(out, set.topology.level);
    Put(out, set.slice.size);
    Put(out, set.slice.level);
    Put(out, set.group);
    // Only when elastic, so fingerprints stored before the field existed
    // still match.
    if (set.min_count != 0) {
      Put(out, "min");
      Put(out, set.min_count);
    }
  }
  // Only when set, so fingerprints stored before the field existed still
  // match their retries.
  if (!spec.priority_class.empty()) Put(out, spec.priority_class);
  if (spec.lease_duration != absl::ZeroDuration()) {
    Put(out, "lease");
    Put(out, absl::ToInt64Milliseconds(spec.lease_duration));
  }
  return out;
}

}  // namespace

uint64_t SpecFingerprint(const GangSpec& spec) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : CanonicalSpec(spec)) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace phalanx::core
