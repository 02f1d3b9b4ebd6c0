#include "core/validate.h"

#include <cmath>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace phalanx::core {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

absl::Status ValidatePodSet(const PodSetSpec& set, const std::string& field) {
  if (absl::Status s = ValidateName(set.name, absl::StrCat(field, ".name"));
      !s.ok()) {
    return s;
  }
  if (set.count <= 0) return Bad(absl::StrCat(field, ".count"), "must be > 0");
  if (set.count > kMaxPodsPerSet) {
    return Bad(absl::StrCat(field, ".count"),
               absl::StrCat("must be <= ", kMaxPodsPerSet));
  }
  if (set.gpus < 0 || set.gpus > kMaxGpusPerNode) {
    return Bad(absl::StrCat(field, ".gpus"),
               absl::StrCat("must be in 0..", kMaxGpusPerNode));
  }
  if (set.cpu_millis < 0) {
    return Bad(absl::StrCat(field, ".cpu_millis"), "must be >= 0");
  }
  if (set.memory_bytes < 0) {
    return Bad(absl::StrCat(field, ".memory_bytes"), "must be >= 0");
  }
  if (set.gpus == 0 && set.cpu_millis == 0 && set.memory_bytes == 0) {
    return Bad(absl::StrCat(field, ".gpus"),
               "a pod must request GPUs, CPU or memory");
  }
  for (size_t i = 0; i < set.gpu_models.size(); ++i) {
    if (absl::Status s = ValidateName(
            set.gpu_models[i], absl::StrCat(field, ".gpu_models[", i, "]"));
        !s.ok()) {
      return s;
    }
  }
  if (set.topology.mode != TopologyMode::kUnconstrained &&
      set.topology.level.empty()) {
    return Bad(absl::StrCat(field, ".topology.level"),
               "required for REQUIRED and PREFERRED");
  }
  if (set.slice.size < 0) {
    return Bad(absl::StrCat(field, ".slice.size"), "must be >= 0");
  }
  if (set.slice.size > 0 && set.slice.level.empty()) {
    return Bad(absl::StrCat(field, ".slice.level"),
               "required when slice.size is set");
  }
  if (set.slice.size == 0 && !set.slice.level.empty()) {
    return Bad(absl::StrCat(field, ".slice.size"),
               "must be > 0 when slice.level is set");
  }
  if (set.slice.size > 0 && set.count % set.slice.size != 0) {
    return Bad(absl::StrCat(field, ".slice.size"),
               absl::StrCat("must divide count (", set.count, ")"));
  }
  if (!set.group.empty()) {
    RETURN_IF_ERROR(ValidateName(set.group, absl::StrCat(field, ".group")));
    if (set.topology.mode != TopologyMode::kUnconstrained &&
        set.topology.level == kNodeLevel) {
      return Bad(absl::StrCat(field, ".group"),
                 "a group shares a domain above the node level, not \"node\"");
    }
  }
  return absl::OkStatus();
}

}  // namespace

void NormalizeGangSpec(GangSpec& spec) {
  for (size_t i = 0; i < spec.pod_sets.size(); ++i) {
    if (spec.pod_sets[i].name.empty()) {
      spec.pod_sets[i].name = absl::StrCat("set-", i);
    }
  }
}

absl::Status ValidateName(absl::string_view name, absl::string_view field) {
  if (name.empty()) return Bad(field, "must not be empty");
  if (name.size() > kMaxNameBytes) {
    return Bad(field,
               absl::StrCat("must be at most ", kMaxNameBytes, " bytes"));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return Bad(field, absl::StrCat("\"", name,
                                     "\" may hold only letters, digits, "
                                     "'.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

namespace {

// The pod sets of a group share one domain, so they must be constrained
// alike: pod set `i` against the first of its group.
absl::Status CheckGroupTopology(const GangSpec& spec, size_t i,
                                const std::string& path) {
  const PodSetSpec& set = spec.pod_sets[i];
  if (set.group.empty()) return absl::OkStatus();
  for (size_t j = 0; j < i; ++j) {
    const PodSetSpec& first = spec.pod_sets[j];
    if (first.group != set.group) continue;
    if (first.topology == set.topology) return absl::OkStatus();
    return Bad(path + ".topology",
               absl::StrCat("must equal that of pod set \"", first.name,
                            "\" in group \"", set.group, "\""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGangSpec(const GangSpec& spec, absl::string_view field) {
  const std::string f(field);
  if (spec.queue.empty()) return Bad(f + ".queue", "must not be empty");
  if (spec.request_id.size() > kMaxRequestIdBytes) {
    return Bad(f + ".request_id",
               absl::StrCat("must be at most ", kMaxRequestIdBytes, " bytes"));
  }
  if (spec.labels.size() > kMaxLabels) {
    return Bad(f + ".labels", absl::StrCat("at most ", kMaxLabels, " labels"));
  }
  if (spec.estimated_runtime < absl::ZeroDuration()) {
    return Bad(f + ".estimated_runtime", "must be >= 0");
  }
  if (spec.max_runtime < absl::ZeroDuration()) {
    return Bad(f + ".max_runtime", "must be >= 0");
  }
  if (spec.pod_sets.empty()) return Bad(f + ".pod_sets", "must not be empty");
  if (spec.pod_sets.size() > kMaxPodSets) {
    return Bad(f + ".pod_sets", absl::StrCat("at most ", kMaxPodSets));
  }
  std::set<std::string> names;
  for (size_t i = 0; i < spec.pod_sets.size(); ++i) {
    const std::string path = absl::StrCat(f, ".pod_sets[", i, "]");
    if (absl::Status s = ValidatePodSet(spec.pod_sets[i], path); !s.ok()) {
      return s;
    }
    if (!names.insert(spec.pod_sets[i].name).second) {
      return Bad(path + ".name", absl::StrCat("duplicate pod set name \"",
                                              spec.pod_sets[i].name, "\""));
    }
    RETURN_IF_ERROR(CheckGroupTopology(spec, i, path));
  }
  return absl::OkStatus();
}

absl::Status ValidateNodeSpec(const NodeSpec& spec, absl::string_view field) {
  const std::string f(field);
  if (absl::Status s = ValidateName(spec.id.value(), f + ".id"); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateName(spec.gpu_model, f + ".gpu_model");
      !s.ok()) {
    return s;
  }
  if (spec.gpu_count < 1 || spec.gpu_count > kMaxGpusPerNode) {
    return Bad(f + ".gpu_count",
               absl::StrCat("must be in 1..", kMaxGpusPerNode));
  }
  if (spec.cpu_millis < 0) return Bad(f + ".cpu_millis", "must be >= 0");
  if (spec.memory_bytes < 0) return Bad(f + ".memory_bytes", "must be >= 0");
  for (const auto& [key, value] : spec.labels) {
    if (value.empty() || value.find('/') != std::string::npos) {
      return Bad(absl::StrCat(f, ".labels[", key, "]"),
                 "must be non-empty and hold no '/'");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateQueue(const Queue& queue, absl::string_view field) {
  const std::string f(field);
  if (absl::Status s = ValidateName(queue.name.value(), f + ".name"); !s.ok()) {
    return s;
  }
  if (queue.parent == queue.name) {
    return Bad(f + ".parent", "a queue cannot be its own parent");
  }
  if (!std::isfinite(queue.weight) || queue.weight < 0) {
    return Bad(f + ".weight", "must be a finite number >= 0");
  }
  for (const auto& [model, gpus] : queue.nominal_gpus) {
    if (gpus < 0) {
      return Bad(absl::StrCat(f, ".nominal_gpus[", model, "]"), "must be >= 0");
    }
  }
  if (queue.borrowing_limit_gpus < -1) {
    return Bad(f + ".borrowing_limit_gpus", "must be >= -1 (-1 = unlimited)");
  }
  if (queue.lending_limit_gpus < -1) {
    return Bad(f + ".lending_limit_gpus", "must be >= -1 (-1 = unlimited)");
  }
  return absl::OkStatus();
}

absl::Status ValidateConfig(const Config& config, absl::string_view field) {
  const std::string f(field);
  for (const auto& [name, priority] : config.priority_classes) {
    const std::string path = absl::StrCat(f, ".priority_classes");
    if (absl::Status s = ValidateName(name, path); !s.ok()) return s;
  }
  std::set<std::string> levels;
  for (size_t i = 0; i < config.topology_levels.size(); ++i) {
    const std::string path = absl::StrCat(f, ".topology_levels[", i, "]");
    const std::string& level = config.topology_levels[i];
    if (absl::Status s = ValidateName(level, path); !s.ok()) return s;
    if (level == kNodeLevel) {
      return Bad(path, "\"node\" is the implicit last level; do not list it");
    }
    if (!levels.insert(level).second) {
      return Bad(path, absl::StrCat("duplicate level \"", level, "\""));
    }
  }
  if (config.reservation.depth < 0 || config.reservation.depth > 64) {
    return Bad(f + ".reservation.depth", "must be in 0..64");
  }
  if (config.reservation.after < absl::ZeroDuration()) {
    return Bad(f + ".reservation.after", "must be >= 0");
  }
  if (config.preemption.grace_period < absl::ZeroDuration()) {
    return Bad(f + ".preemption.grace_period", "must be >= 0");
  }
  if (config.preemption.min_runtime < absl::ZeroDuration()) {
    return Bad(f + ".preemption.min_runtime", "must be >= 0");
  }
  if (config.preemption.horizon < absl::ZeroDuration()) {
    return Bad(f + ".preemption.horizon", "must be >= 0");
  }
  if (config.fair_share.half_life <= absl::ZeroDuration()) {
    return Bad(f + ".fair_share.half_life", "must be > 0");
  }
  if (config.fair_share.sample_interval <= absl::ZeroDuration()) {
    return Bad(f + ".fair_share.sample_interval", "must be > 0");
  }
  for (const auto& [model, weight] : config.fair_share.model_weights) {
    if (!std::isfinite(weight) || weight < 0) {
      return Bad(absl::StrCat(f, ".fair_share.model_weights[", model, "]"),
                 "must be a finite number >= 0");
    }
  }
  if (config.cycle_interval < absl::Milliseconds(1)) {
    return Bad(f + ".cycle_interval", "must be >= 1ms");
  }
  if (config.retention.finished_gangs < 0) {
    return Bad(f + ".retention.finished_gangs", "must be >= 0");
  }
  if (config.retention.finished_gang_age < absl::ZeroDuration()) {
    return Bad(f + ".retention.finished_gang_age", "must be >= 0");
  }
  if (config.retention.audit_records < 100) {
    return Bad(f + ".retention.audit_records", "must be >= 100");
  }
  if (config.retention.audit_age < absl::Hours(1)) {
    return Bad(f + ".retention.audit_age", "must be >= 1h");
  }
  if (config.retention.events < 10) {
    return Bad(f + ".retention.events", "must be >= 10");
  }
  if (config.watch.bookmark_interval < absl::Milliseconds(10)) {
    return Bad(f + ".watch.bookmark_interval", "must be >= 10ms");
  }
  if (config.watch.max_lag_events < 1) {
    return Bad(f + ".watch.max_lag_events", "must be >= 1");
  }
  if (config.idempotency_retention < absl::ZeroDuration()) {
    return Bad(f + ".idempotency.retention", "must be >= 0");
  }
  if (config.heartbeat_timeout < absl::ZeroDuration()) {
    return Bad(f + ".node.heartbeat_timeout", "must be >= 0 (0 = off)");
  }
  if (config.start_timeout < absl::ZeroDuration()) {
    return Bad(f + ".lifecycle.start_timeout", "must be >= 0 (0 = off)");
  }
  if (config.startup_grace < absl::ZeroDuration()) {
    return Bad(f + ".node.startup_grace", "must be >= 0");
  }
  return absl::OkStatus();
}

}  // namespace phalanx::core
