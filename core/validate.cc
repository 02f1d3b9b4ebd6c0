#include "core/validate.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status_macros.h"

namespace phalanx::core {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// An elastic pod set runs with min_count..count pods, whole slices.
absl::Status ValidateMinCount(const PodSetSpec& set, const std::string& field) {
  if (set.min_count == 0) return absl::OkStatus();
  const std::string path = absl::StrCat(field, ".min_count");
  if (set.min_count < 0 || set.min_count > set.count) {
    return Bad(path, absl::StrCat("must be 0 (fixed size) or in 1..count (",
                                  set.count, "), not ", set.min_count));
  }
  if (set.slice.size > 0 && set.min_count % set.slice.size != 0) {
    return Bad(path, absl::StrCat("must be a multiple of slice.size (",
                                  set.slice.size, ")"));
  }
  return absl::OkStatus();
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
  if (set.gpu_models.size() > kMaxGpuModels) {
    return Bad(absl::StrCat(field, ".gpu_models"),
               absl::StrCat("at most ", kMaxGpuModels, " models"));
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
  RETURN_IF_ERROR(ValidateMinCount(set, field));
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

namespace {

// Checks `name`: 1..63 bytes, each a letter, digit, '.', '_' or '-', and
// letters lower-case when `lower_only`.
absl::Status CheckName(absl::string_view name, absl::string_view field,
                       bool lower_only) {
  if (name.empty()) return Bad(field, "must not be empty");
  if (name.size() > kMaxNameBytes) {
    return Bad(field,
               absl::StrCat("must be at most ", kMaxNameBytes, " bytes"));
  }
  for (char c : name) {
    const bool letter =
        lower_only ? absl::ascii_islower(c) : absl::ascii_isalpha(c);
    if (!letter && !absl::ascii_isdigit(c) && c != '.' && c != '_' &&
        c != '-') {
      return Bad(field, absl::StrCat(QuoteForError(name), " may hold only ",
                                     lower_only ? "lower-case " : "",
                                     "letters, digits, '.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

bool IsLabelKeyChar(char c) {
  return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '/' || c == '-';
}

}  // namespace

std::string QuoteForError(absl::string_view value) {
  size_t cut = std::min(value.size(), kMaxQuotedBytes);
  // Never split a UTF-8 sequence: back off over continuation bytes.
  if (cut < value.size()) {
    while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) {
      --cut;
    }
  }
  std::string out = "\"";
  for (char c : value.substr(0, cut)) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7F) {
      absl::StrAppendFormat(&out, "\\x%02x", u);
    } else {
      out += c;
    }
  }
  out += '"';
  if (cut < value.size())
    absl::StrAppend(&out, "... (", value.size(), " bytes)");
  return out;
}

absl::Status ValidateName(absl::string_view name, absl::string_view field) {
  return CheckName(name, field, /*lower_only=*/false);
}

absl::Status ValidateQueueName(absl::string_view name,
                               absl::string_view field) {
  return CheckName(name, field, /*lower_only=*/true);
}

absl::Status ValidateId(absl::string_view id, const LimitsConfig& limits,
                        absl::string_view field) {
  if (id.empty()) return Bad(field, "must not be empty");
  if (id.size() > static_cast<size_t>(limits.max_id_bytes)) {
    return Bad(field, absl::StrCat("longer than ", limits.max_id_bytes,
                                   " bytes (", id.size(), ")"));
  }
  for (char c : id) {
    if (!absl::ascii_isgraph(c)) {
      return Bad(field, absl::StrCat(QuoteForError(id),
                                     " may hold only printable ASCII "
                                     "without spaces"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> GpuIndexMask(const std::vector<int>& gpus,
                                      int gpu_count, absl::string_view field) {
  const int limit = std::min(gpu_count, 64);
  uint64_t mask = 0;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i] < 0 || gpus[i] >= limit) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "]: GPU ", gpus[i],
                       " does not exist; the node has ", gpu_count));
    }
    const uint64_t bit = uint64_t{1} << gpus[i];
    if (mask & bit) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "]: GPU ", gpus[i], " is named twice"));
    }
    mask |= bit;
  }
  return mask;
}

absl::Status ValidateMessage(absl::string_view message,
                             const LimitsConfig& limits,
                             absl::string_view field) {
  if (message.size() > static_cast<size_t>(limits.max_message_bytes)) {
    return Bad(field, absl::StrCat("longer than ", limits.max_message_bytes,
                                   " bytes (", message.size(), ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabels(const std::map<std::string, std::string>& labels,
                            const LimitsConfig& limits,
                            absl::string_view field) {
  if (labels.size() > static_cast<size_t>(limits.max_labels)) {
    return Bad(field, absl::StrCat("at most ", limits.max_labels,
                                   " labels, not ", labels.size()));
  }
  for (const auto& [key, value] : labels) {
    const std::string path = absl::StrCat(field, "[", QuoteForError(key), "]");
    if (key.empty()) return Bad(path, "key must not be empty");
    if (key.size() > static_cast<size_t>(limits.max_label_key_bytes)) {
      return Bad(path, absl::StrCat("key longer than ",
                                    limits.max_label_key_bytes, " bytes"));
    }
    if (!std::all_of(key.begin(), key.end(), IsLabelKeyChar)) {
      return Bad(path,
                 "key may hold only letters, digits, '.', '_', '/' and '-'");
    }
    if (value.size() > static_cast<size_t>(limits.max_label_value_bytes)) {
      return Bad(path, absl::StrCat("value longer than ",
                                    limits.max_label_value_bytes, " bytes"));
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
    return Bad(
        path + ".topology",
        absl::StrCat("must equal that of pod set ", QuoteForError(first.name),
                     " in group ", QuoteForError(set.group)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGangSpec(const GangSpec& spec, const LimitsConfig& limits,
                              absl::string_view field) {
  const std::string f(field);
  RETURN_IF_ERROR(ValidateQueueName(spec.queue.value(), f + ".queue"));
  if (!spec.request_id.empty()) {
    RETURN_IF_ERROR(ValidateId(spec.request_id, limits, f + ".request_id"));
  }
  RETURN_IF_ERROR(ValidateLabels(spec.labels, limits, f + ".labels"));
  if (spec.estimated_runtime < absl::ZeroDuration()) {
    return Bad(f + ".estimated_runtime", "must be >= 0");
  }
  if (spec.max_runtime < absl::ZeroDuration()) {
    return Bad(f + ".max_runtime", "must be >= 0");
  }
  if (spec.lease_duration != absl::ZeroDuration() &&
      (spec.lease_duration < kMinLeaseDuration ||
       spec.lease_duration > kMaxLeaseDuration)) {
    return Bad(f + ".lease_duration",
               absl::StrCat("must be 0 (no lease) or in ",
                            absl::FormatDuration(kMinLeaseDuration), "..",
                            absl::FormatDuration(kMaxLeaseDuration), ", not ",
                            absl::FormatDuration(spec.lease_duration)));
  }
  if (spec.pod_sets.empty()) return Bad(f + ".pod_sets", "must not be empty");
  if (spec.pod_sets.size() > kMaxPodSets) {
    return Bad(f + ".pod_sets", absl::StrCat("at most ", kMaxPodSets));
  }
  std::set<std::string> names;
  int elastic = -1;
  for (size_t i = 0; i < spec.pod_sets.size(); ++i) {
    const std::string path = absl::StrCat(f, ".pod_sets[", i, "]");
    if (absl::Status s = ValidatePodSet(spec.pod_sets[i], path); !s.ok()) {
      return s;
    }
    if (!names.insert(spec.pod_sets[i].name).second) {
      return Bad(path + ".name",
                 absl::StrCat("duplicate pod set name ",
                              QuoteForError(spec.pod_sets[i].name)));
    }
    RETURN_IF_ERROR(CheckGroupTopology(spec, i, path));
    if (spec.pod_sets[i].min_count != 0 &&
        spec.pod_sets[i].min_count != spec.pod_sets[i].count) {
      if (elastic >= 0) {
        return Bad(path + ".min_count",
                   absl::StrCat("only one pod set of a gang may be elastic; "
                                "pod_sets[",
                                elastic, "] already is"));
      }
      elastic = static_cast<int>(i);
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateNodeSpec(const NodeSpec& spec, const LimitsConfig& limits,
                              absl::string_view field) {
  const std::string f(field);
  RETURN_IF_ERROR(ValidateId(spec.id.value(), limits, f + ".id"));
  RETURN_IF_ERROR(ValidateName(spec.id.value(), f + ".id"));
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
  if (!spec.address.empty()) {
    RETURN_IF_ERROR(ValidateId(spec.address, limits, f + ".address"));
  }
  RETURN_IF_ERROR(ValidateLabels(spec.labels, limits, f + ".labels"));
  for (const auto& [key, value] : spec.labels) {
    // Values name topology domains, joined by '/' into domain paths.
    if (value.empty() || value.find('/') != std::string::npos) {
      return Bad(absl::StrCat(f, ".labels[", QuoteForError(key), "]"),
                 "must be non-empty and hold no '/'");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateQueue(const Queue& queue, const LimitsConfig& limits,
                           absl::string_view field) {
  const std::string f(field);
  RETURN_IF_ERROR(ValidateQueueName(queue.name.value(), f + ".name"));
  if (!queue.parent.empty()) {
    RETURN_IF_ERROR(ValidateQueueName(queue.parent.value(), f + ".parent"));
  }
  if (queue.parent == queue.name) {
    return Bad(f + ".parent", "a queue cannot be its own parent");
  }
  if (!std::isfinite(queue.weight) || queue.weight < 0) {
    return Bad(f + ".weight", "must be a finite number >= 0");
  }
  const int64_t max = limits.max_quota_gpus;
  if (queue.nominal_gpus.size() > static_cast<size_t>(limits.max_labels)) {
    return Bad(f + ".nominal_gpus",
               absl::StrCat("at most ", limits.max_labels, " GPU models, not ",
                            queue.nominal_gpus.size()));
  }
  for (const auto& [model, gpus] : queue.nominal_gpus) {
    const std::string path =
        absl::StrCat(f, ".nominal_gpus[", QuoteForError(model), "]");
    RETURN_IF_ERROR(ValidateName(model, path));
    if (gpus < 0 || gpus > max) {
      return Bad(path, absl::StrCat("must be in 0..", max));
    }
  }
  if (queue.borrowing_limit_gpus < -1 || queue.borrowing_limit_gpus > max) {
    return Bad(f + ".borrowing_limit_gpus",
               absl::StrCat("must be -1 (unlimited) or in 0..", max));
  }
  if (queue.lending_limit_gpus < -1 || queue.lending_limit_gpus > max) {
    return Bad(f + ".lending_limit_gpus",
               absl::StrCat("must be -1 (unlimited) or in 0..", max));
  }
  return absl::OkStatus();
}

namespace {

absl::Status InRange(int64_t value, int64_t low, int64_t high,
                     const std::string& field) {
  if (value >= low && value <= high) return absl::OkStatus();
  return Bad(field, absl::StrCat("must be in ", low, "..", high));
}

absl::Status ValidateLimits(const LimitsConfig& l, const std::string& f) {
  RETURN_IF_ERROR(InRange(l.max_labels, 1, 1024, f + ".max_labels"));
  RETURN_IF_ERROR(
      InRange(l.max_label_key_bytes, 1, 1024, f + ".max_label_key_bytes"));
  RETURN_IF_ERROR(InRange(l.max_label_value_bytes, 1, 64 << 10,
                          f + ".max_label_value_bytes"));
  // Gang ids the scheduler makes ("g-000042") must stay valid ids.
  RETURN_IF_ERROR(InRange(l.max_id_bytes, 32, 4096, f + ".max_id_bytes"));
  RETURN_IF_ERROR(
      InRange(l.max_message_bytes, 64, 64 << 10, f + ".max_message_bytes"));
  RETURN_IF_ERROR(
      InRange(l.max_quota_gpus, 1, kMaxQuotaGpus, f + ".max_quota_gpus"));
  RETURN_IF_ERROR(InRange(l.max_pending_gangs_per_queue, 1, 10'000'000,
                          f + ".max_pending_gangs_per_queue"));
  if (!std::isfinite(l.requests_per_second) || l.requests_per_second <= 0 ||
      l.requests_per_second > 1e9) {
    return Bad(f + ".requests_per_second", "must be in (0, 1e9]");
  }
  RETURN_IF_ERROR(
      InRange(l.request_burst, 1, 1'000'000'000, f + ".request_burst"));
  RETURN_IF_ERROR(InRange(l.watch_streams_per_principal, 1, 65536,
                          f + ".watch_streams_per_principal"));
  RETURN_IF_ERROR(InRange(l.watch_stream_buffer_bytes, int64_t{64} << 10,
                          int64_t{1} << 30, f + ".watch_stream_buffer_bytes"));
  RETURN_IF_ERROR(InRange(l.watch_total_buffer_bytes,
                          l.watch_stream_buffer_bytes, int64_t{64} << 30,
                          f + ".watch_total_buffer_bytes"));
  return absl::OkStatus();
}

absl::Status ValidatePlanning(const PlanningConfig& p, const std::string& f) {
  RETURN_IF_ERROR(InRange(p.max_gangs, 0, 10000, f + ".max_gangs"));
  if (p.window <= absl::ZeroDuration()) {
    return Bad(f + ".window", "must be > 0");
  }
  if (p.interval <= absl::ZeroDuration() || p.interval > absl::Hours(1)) {
    return Bad(f + ".interval", "must be > 0 and at most 1h");
  }
  if (p.default_runtime <= absl::ZeroDuration()) {
    return Bad(f + ".default_runtime", "must be > 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateConfig(const Config& config, absl::string_view field) {
  const std::string f(field);
  for (const auto& [name, priority] : config.priority_classes) {
    const std::string path = absl::StrCat(f, ".priority_classes");
    if (absl::Status s = ValidateQueueName(name, path); !s.ok()) return s;
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
      return Bad(path, absl::StrCat("duplicate level ", QuoteForError(level)));
    }
  }
  if (config.reservation.depth < 0 || config.reservation.depth > 64) {
    return Bad(f + ".reservation.depth", "must be in 0..64");
  }
  if (config.reservation.after < absl::ZeroDuration()) {
    return Bad(f + ".reservation.after", "must be >= 0");
  }
  if (!(config.admission.aging_per_hour >= 0)) {
    return Bad(f + ".admission.aging_per_hour", "must be >= 0");
  }
  if (config.admission.aging_max_levels < 0) {
    return Bad(f + ".admission.aging_max_levels", "must be >= 0");
  }
  if (!(config.admission.fair_share_size_credit >= 0)) {
    return Bad(f + ".admission.fair_share_size_credit", "must be >= 0");
  }
  if (config.admission.fair_share_wait_bound <= absl::ZeroDuration()) {
    return Bad(f + ".admission.fair_share_wait_bound", "must be > 0");
  }
  if (config.reservation.window < absl::ZeroDuration()) {
    return Bad(f + ".reservation.window", "must be >= 0");
  }
  if (config.reservation.max_takeovers < -1) {
    return Bad(f + ".reservation.max_takeovers", "must be >= -1");
  }
  RETURN_IF_ERROR(ValidatePlanning(config.planning, f + ".planning"));
  if (config.preemption.grace_period < absl::ZeroDuration()) {
    return Bad(f + ".preemption.grace_period", "must be >= 0");
  }
  if (config.preemption.min_runtime < absl::ZeroDuration()) {
    return Bad(f + ".preemption.min_runtime", "must be >= 0");
  }
  if (config.elastic.grow_interval < absl::ZeroDuration()) {
    return Bad(f + ".elastic.grow_interval", "must be >= 0");
  }
  if (config.preemption.max_victim_loss < absl::ZeroDuration()) {
    return Bad(f + ".preemption.max_victim_loss", "must be >= 0");
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
      return Bad(absl::StrCat(f, ".fair_share.model_weights[",
                              QuoteForError(model), "]"),
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
  return ValidateLimits(config.limits, f + ".limits");
}

}  // namespace phalanx::core
