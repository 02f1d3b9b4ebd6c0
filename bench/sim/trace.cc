#include "bench/sim/trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace phalanx::bench {
namespace {

// Column indices of the header; -1 = absent (every column but the four
// required ones may be absent).
struct Columns {
  int timestamp = -1;
  int duration = -1;
  int num_gpus = -1;
  int cluster = -1;
  int priority = -1;
  int checkpoint_interval = -1;
  int gang_id = -1;
  int state = -1;
  int pods = -1;
  int gpus_per_pod = -1;
  int gpu_model = -1;
  int topology = -1;
  int start = -1;
  int complete = -1;
  int estimated_runtime = -1;
  int max_runtime = -1;
  size_t required_fields = 0;  // fields a row must have
};

absl::StatusOr<Columns> ParseHeader(absl::string_view line) {
  std::map<std::string, int> index;
  std::vector<std::string> names = SplitCsvLine(line);
  for (size_t i = 0; i < names.size(); ++i) {
    std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(
        i == 0 ? absl::StripPrefix(names[i], "\xEF\xBB\xBF") : names[i]));
    index.emplace(std::move(name), static_cast<int>(i));
  }
  Columns columns;
  std::pair<const char*, int*> required[] = {{"timestamp", &columns.timestamp},
                                             {"duration", &columns.duration},
                                             {"num_gpus", &columns.num_gpus},
                                             {"cluster", &columns.cluster}};
  for (auto& [name, field] : required) {
    auto it = index.find(name);
    if (it == index.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line 1: missing column \"", name,
                       "\" (need timestamp, duration, num_gpus, cluster)"));
    }
    *field = it->second;
    columns.required_fields =
        std::max(columns.required_fields, static_cast<size_t>(*field) + 1);
  }
  std::pair<const char*, int*> optional[] = {
      {"priority", &columns.priority},
      {"checkpoint_interval_s", &columns.checkpoint_interval},
      {"gang_id", &columns.gang_id},
      {"state", &columns.state},
      {"pods", &columns.pods},
      {"gpus_per_pod", &columns.gpus_per_pod},
      {"gpu_model", &columns.gpu_model},
      {"topology", &columns.topology},
      {"start", &columns.start},
      {"complete", &columns.complete},
      {"estimated_runtime_s", &columns.estimated_runtime},
      {"max_runtime_s", &columns.max_runtime}};
  for (auto& [name, field] : optional) {
    if (auto it = index.find(name); it != index.end()) *field = it->second;
  }
  return columns;
}

absl::Status Bad(int64_t line, absl::string_view column,
                 absl::string_view value, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("line ", line, ": ", column, ": \"", value, "\" ", what));
}

// "YYYY-MM-DD HH:MM:SS" (UTC) or seconds since the epoch.
std::optional<absl::Time> ParseTimestamp(absl::string_view text) {
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds) && std::isfinite(seconds)) {
    return absl::FromUnixSeconds(0) + absl::Seconds(seconds);
  }
  absl::Time time;
  std::string error;
  if (absl::ParseTime("%Y-%m-%d %H:%M:%S", std::string(text),
                      absl::UTCTimeZone(), &time, &error)) {
    return time;
  }
  return std::nullopt;
}

// An integer, also written as a float with no fraction ("8.0").
std::optional<int64_t> ParseInteger(absl::string_view text) {
  int64_t value = 0;
  if (absl::SimpleAtoi(text, &value)) return value;
  double d = 0;
  if (absl::SimpleAtod(text, &d) && std::isfinite(d) && d == std::floor(d) &&
      std::fabs(d) < 1e15) {
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

// The fields of one row, by column; empty text for an absent column.
class Row {
 public:
  Row(const std::vector<std::string>& raw, int64_t line)
      : raw_(raw), line_(line) {}

  absl::string_view Text(int column) const {
    if (column < 0 || static_cast<size_t>(column) >= raw_.size()) return "";
    return absl::StripAsciiWhitespace(raw_[column]);
  }
  // A number of seconds >= 0 (> 0 when `positive`); nullopt when empty.
  absl::StatusOr<std::optional<absl::Duration>> Seconds(int column,
                                                        absl::string_view name,
                                                        bool positive) const {
    const absl::string_view text = Text(column);
    if (text.empty()) return std::nullopt;
    double seconds = 0;
    if (!absl::SimpleAtod(text, &seconds) || !std::isfinite(seconds) ||
        seconds < 0 || (positive && seconds == 0)) {
      return Bad(line_, name, text,
                 positive ? "is not a positive number of seconds"
                          : "is not a number of seconds >= 0");
    }
    return absl::Seconds(seconds);
  }
  // An integer in [lo, hi]; `fallback` when empty.
  absl::StatusOr<int64_t> Integer(int column, absl::string_view name,
                                  int64_t lo, int64_t hi,
                                  int64_t fallback) const {
    const absl::string_view text = Text(column);
    if (text.empty()) return fallback;
    std::optional<int64_t> n = ParseInteger(text);
    if (!n || *n < lo || *n > hi) {
      return Bad(line_, name, text,
                 absl::StrCat("is not an integer in ", lo, "..", hi));
    }
    return *n;
  }
  // A timestamp; nullopt when empty.
  absl::StatusOr<std::optional<absl::Time>> Time(int column,
                                                 absl::string_view name) const {
    const absl::string_view text = Text(column);
    if (text.empty()) return std::nullopt;
    std::optional<absl::Time> time = ParseTimestamp(text);
    if (!time) {
      return Bad(line_, name, text,
                 "is neither \"YYYY-MM-DD HH:MM:SS\" nor seconds");
    }
    return time;
  }

 private:
  const std::vector<std::string>& raw_;
  int64_t line_;
};

// The required columns, priority and checkpoint interval.
absl::Status ParseCore(const Row& row, const Columns& columns, int64_t line,
                       TraceJob& job) {
  absl::StatusOr<std::optional<absl::Time>> submit =
      row.Time(columns.timestamp, "timestamp");
  if (!submit.ok()) return submit.status();
  if (!*submit) return Bad(line, "timestamp", "", "is empty");
  job.submit_time = **submit;
  absl::StatusOr<int64_t> complete =
      row.Integer(columns.complete, "complete", 0, 1, 1);
  if (!complete.ok()) return complete.status();
  job.complete = *complete == 1;
  // An incomplete run may have no duration yet (it never started).
  absl::StatusOr<std::optional<absl::Duration>> duration =
      row.Seconds(columns.duration, "duration", /*positive=*/job.complete);
  if (!duration.ok()) return duration.status();
  if (!*duration && job.complete) {
    return Bad(line, "duration", "", "is not a positive number of seconds");
  }
  job.duration = duration->value_or(absl::ZeroDuration());
  absl::StatusOr<int64_t> gpus =
      row.Integer(columns.num_gpus, "num_gpus", 1, 1000000, 0);
  if (!gpus.ok()) return gpus.status();
  if (*gpus == 0) return Bad(line, "num_gpus", "", "is not a positive integer");
  job.gpus = static_cast<int>(*gpus);
  job.team = std::string(row.Text(columns.cluster));
  if (job.team.empty()) return Bad(line, "cluster", "", "is empty");
  absl::StatusOr<int64_t> priority =
      row.Integer(columns.priority, "priority", -1000000000, 1000000000, 0);
  if (!priority.ok()) return priority.status();
  job.priority = static_cast<int>(*priority);
  absl::StatusOr<std::optional<absl::Duration>> interval =
      row.Seconds(columns.checkpoint_interval, "checkpoint_interval_s", false);
  if (!interval.ok()) return interval.status();
  job.checkpoint_interval = *interval;
  return absl::OkStatus();
}

// "required:LEVEL", "preferred:LEVEL" (any case) or empty, lower-cased;
// nullopt when malformed.
std::optional<std::string> ParseTopology(absl::string_view text) {
  if (text.empty()) return std::string();
  std::pair<std::string, std::string> mode_level =
      absl::StrSplit(absl::AsciiStrToLower(text), absl::MaxSplits(':', 1));
  if ((mode_level.first != "required" && mode_level.first != "preferred") ||
      mode_level.second.empty()) {
    return std::nullopt;
  }
  return absl::StrCat(mode_level.first, ":", mode_level.second);
}

// The ';'-separated values of a pod-set column: one a pod set, or none at
// all (an empty field) when `may_be_empty`.
absl::StatusOr<std::vector<std::string>> PerPodSet(const Row& row, int column,
                                                   absl::string_view name,
                                                   size_t pod_sets,
                                                   bool may_be_empty,
                                                   int64_t line) {
  const absl::string_view text = row.Text(column);
  if (text.empty() && may_be_empty) {
    return std::vector<std::string>(pod_sets);
  }
  std::vector<std::string> values = absl::StrSplit(text, ';');
  if (values.size() != pod_sets) {
    return Bad(line, name, text,
               absl::StrCat("has ", values.size(), " values for ", pod_sets,
                            " pod sets (pods)"));
  }
  for (std::string& value : values) {
    value = std::string(absl::StripAsciiWhitespace(value));
  }
  return values;
}

// A positive integer of at most a million; nullopt otherwise.
std::optional<int> SmallCount(absl::string_view text, bool zero_ok) {
  std::optional<int64_t> n = ParseInteger(text);
  if (!n || *n < (zero_ok ? 0 : 1) || *n > 1000000) return std::nullopt;
  return static_cast<int>(*n);
}

// The gang's shape: pods, gpus_per_pod, gpu_model and topology, one value
// a pod set each.
absl::Status ParseShape(const Row& row, const Columns& columns, int64_t line,
                        TraceJob& job) {
  const absl::string_view pods = row.Text(columns.pods);
  const absl::string_view per_pod = row.Text(columns.gpus_per_pod);
  if (pods.empty() != per_pod.empty()) {
    return Bad(line, pods.empty() ? "pods" : "gpus_per_pod", "",
               "is empty: give pods and gpus_per_pod together");
  }
  if (pods.empty()) return absl::OkStatus();
  const std::vector<std::string> counts = absl::StrSplit(pods, ';');
  absl::StatusOr<std::vector<std::string>> gpus = PerPodSet(
      row, columns.gpus_per_pod, "gpus_per_pod", counts.size(), false, line);
  if (!gpus.ok()) return gpus.status();
  absl::StatusOr<std::vector<std::string>> models =
      PerPodSet(row, columns.gpu_model, "gpu_model", counts.size(), true, line);
  if (!models.ok()) return models.status();
  absl::StatusOr<std::vector<std::string>> topologies =
      PerPodSet(row, columns.topology, "topology", counts.size(), true, line);
  if (!topologies.ok()) return topologies.status();
  int64_t total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    TracePodSet set;
    std::optional<int> count = SmallCount(counts[i], /*zero_ok=*/false);
    if (!count) return Bad(line, "pods", pods, "is not positive integers");
    std::optional<int> per = SmallCount((*gpus)[i], /*zero_ok=*/true);
    if (!per) {
      return Bad(line, "gpus_per_pod", per_pod, "is not integers >= 0");
    }
    std::optional<std::string> topology = ParseTopology((*topologies)[i]);
    if (!topology) {
      return Bad(line, "topology", (*topologies)[i],
                 "is not \"required:LEVEL\" or \"preferred:LEVEL\"");
    }
    set.count = *count;
    set.gpus = *per;
    set.gpu_models = absl::StrSplit((*models)[i], '|', absl::SkipEmpty());
    set.topology = *std::move(topology);
    total += static_cast<int64_t>(set.count) * set.gpus;
    job.pod_sets.push_back(std::move(set));
  }
  if (total != job.gpus) {
    return Bad(line, "pods", pods,
               absl::StrCat("times gpus_per_pod is ", total,
                            " GPUs, not num_gpus ", job.gpus));
  }
  return absl::OkStatus();
}

// What the daemon recorded: id, first start, declared run times.
absl::Status ParseRecorded(const Row& row, const Columns& columns,
                           TraceJob& job) {
  job.gang_id = std::string(row.Text(columns.gang_id));
  absl::StatusOr<std::optional<absl::Time>> start =
      row.Time(columns.start, "start");
  if (!start.ok()) return start.status();
  job.recorded_start = *start;
  absl::StatusOr<std::optional<absl::Duration>> estimate =
      row.Seconds(columns.estimated_runtime, "estimated_runtime_s", true);
  if (!estimate.ok()) return estimate.status();
  job.declared_estimate = *estimate;
  job.runtimes_recorded = columns.estimated_runtime >= 0;
  absl::StatusOr<std::optional<absl::Duration>> max_runtime =
      row.Seconds(columns.max_runtime, "max_runtime_s", true);
  if (!max_runtime.ok()) return max_runtime.status();
  job.declared_max_runtime = *max_runtime;
  return absl::OkStatus();
}

// A gang the daemon ended (cancelled, failed) before it ever started.
bool EndedUnstarted(const Row& row, const Columns& columns,
                    const TraceJob& job) {
  const std::string state = absl::AsciiStrToUpper(row.Text(columns.state));
  return !job.recorded_start && (state == "CANCELLED" || state == "FAILED");
}

// The job of one row, or nullopt for a gang that never started and never
// will (EndedUnstarted).
absl::StatusOr<std::optional<TraceJob>> ParseRow(
    const std::vector<std::string>& raw, const Columns& columns, int64_t line) {
  if (raw.size() < columns.required_fields) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", line, ": ", raw.size(),
                     " fields, expected at least ", columns.required_fields));
  }
  const Row row(raw, line);
  TraceJob job;
  job.line = line;
  if (absl::Status s = ParseCore(row, columns, line, job); !s.ok()) return s;
  if (absl::Status s = ParseShape(row, columns, line, job); !s.ok()) return s;
  if (absl::Status s = ParseRecorded(row, columns, job); !s.ok()) return s;
  if (EndedUnstarted(row, columns, job)) return std::nullopt;
  return job;
}

}  // namespace

std::vector<std::string> SplitCsvLine(absl::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

absl::StatusOr<std::vector<TraceJob>> ParseTrace(absl::string_view text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  size_t first = 0;
  while (first < lines.size() &&
         absl::StripAsciiWhitespace(lines[first]).empty()) {
    ++first;
  }
  if (first == lines.size()) {
    return absl::InvalidArgumentError("line 1: empty trace, no header");
  }
  if (first > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", first + 1, ": the header must be line 1"));
  }
  absl::StatusOr<Columns> columns = ParseHeader(lines[0]);
  if (!columns.ok()) return columns.status();
  std::vector<TraceJob> jobs;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (absl::StripAsciiWhitespace(lines[i]).empty()) continue;
    absl::StatusOr<std::optional<TraceJob>> job =
        ParseRow(SplitCsvLine(lines[i]), *columns, static_cast<int64_t>(i) + 1);
    if (!job.ok()) return job.status();
    if (*job) jobs.push_back(**std::move(job));
  }
  return jobs;
}

void ResolveOpenRuns(std::vector<TraceJob>& jobs,
                     absl::Duration default_runtime) {
  for (TraceJob& job : jobs) {
    if (job.complete) continue;
    const absl::Duration expected = job.declared_estimate.value_or(
        job.declared_max_runtime.value_or(default_runtime));
    job.duration = std::max(job.duration, expected);
  }
}

absl::StatusOr<std::vector<TraceJob>> ReadTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<TraceJob>> jobs = ParseTrace(text.str());
  if (!jobs.ok()) {
    return absl::Status(jobs.status().code(),
                        absl::StrCat(path, ": ", jobs.status().message()));
  }
  return jobs;
}

}  // namespace phalanx::bench
