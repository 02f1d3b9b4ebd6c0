#include "bench/sim/whatif.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "bench/sim/sim_metrics.h"
#include "core/validate.h"
#include "proto/convert.h"
#include "proto/startup_files.h"

namespace phalanx::bench {
namespace {

// Gangs of at least this many GPUs are "large" (bench/README.md).
constexpr int kLargeGpus = 64;

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::Status InFile(const std::string& path, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(path, ": ", status.message()));
}

// The base name of `path` without its extension.
std::string Stem(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  const size_t dot = name.find_last_of('.');
  if (dot != std::string::npos && dot > 0) name.resize(dot);
  return name;
}

// One queue's figures under one policy.
struct QueueFigures {
  int finished = 0;
  std::optional<double> p50_hours;
  std::optional<double> p95_hours;
  std::optional<double> large_p95_hours;
  double gpu_hours = 0;
  int preemptions = 0;
};

std::map<std::string, QueueFigures> FiguresByQueue(
    const std::vector<TraceJob>& jobs, const PolicyOutcome& outcome) {
  std::map<std::string, std::vector<double>> waits;
  std::map<std::string, std::vector<double>> large_waits;
  std::map<std::string, QueueFigures> figures;
  for (size_t i = 0; i < jobs.size(); ++i) {
    QueueFigures& f = figures[jobs[i].team];
    if (i < outcome.preemptions.size()) f.preemptions += outcome.preemptions[i];
    if (i >= outcome.waits.size() || !outcome.waits[i]) continue;
    const double hours = absl::ToDoubleHours(*outcome.waits[i]);
    ++f.finished;
    f.gpu_hours += jobs[i].gpus * absl::ToDoubleHours(jobs[i].duration);
    waits[jobs[i].team].push_back(hours);
    if (jobs[i].gpus >= kLargeGpus) large_waits[jobs[i].team].push_back(hours);
  }
  for (auto& [queue, f] : figures) {
    if (auto d = Summarize(waits[queue])) {
      f.p50_hours = d->p50;
      f.p95_hours = d->p95;
    }
    if (auto d = Summarize(large_waits[queue])) f.large_p95_hours = d->p95;
  }
  return figures;
}

std::string Hours(const std::optional<double>& h) {
  return h ? absl::StrFormat("%.2f", *h) : "";
}

// `value` minus `base`, signed; empty unless both are there.
std::string Delta(const std::optional<double>& value,
                  const std::optional<double>& base) {
  return value && base ? absl::StrFormat("%+.2f", *value - *base) : "";
}

// The rows of both tables: queue, policy, then the figures.
std::vector<std::vector<std::string>> QueueRows(
    const std::vector<TraceJob>& jobs,
    const std::vector<PolicyOutcome>& outcomes) {
  std::vector<std::map<std::string, QueueFigures>> by_policy;
  for (const PolicyOutcome& outcome : outcomes) {
    by_policy.push_back(FiguresByQueue(jobs, outcome));
  }
  std::vector<std::vector<std::string>> rows;
  if (by_policy.empty()) return rows;
  for (const auto& [queue, first] : by_policy[0]) {
    for (size_t p = 0; p < outcomes.size(); ++p) {
      const QueueFigures& f = by_policy[p].at(queue);
      rows.push_back(
          {queue, outcomes[p].name, absl::StrCat(f.finished),
           Hours(f.p50_hours), Hours(f.p95_hours), Hours(f.large_p95_hours),
           absl::StrFormat("%.1f", f.gpu_hours), absl::StrCat(f.preemptions),
           p == 0 ? "" : Delta(f.p95_hours, first.p95_hours),
           p == 0 ? "" : Delta(f.large_p95_hours, first.large_p95_hours)});
    }
  }
  return rows;
}

// `fields` as one CSV line, quoted where needed.
std::string CsvLine(std::vector<std::string> fields) {
  for (std::string& field : fields) {
    if (field.find_first_of(",\"\n") != std::string::npos) {
      field = absl::StrCat("\"", absl::StrReplaceAll(field, {{"\"", "\"\""}}),
                           "\"");
    }
  }
  return absl::StrJoin(fields, ",") + "\n";
}

constexpr const char* kQueueColumns[] = {
    "queue",       "policy",           "finished",  "wait_p50_h",
    "wait_p95_h",  "large_p95_h",      "gpu_hours", "preemptions",
    "delta_p95_h", "delta_large_p95_h"};

}  // namespace

absl::StatusOr<NamedConfig> ReadConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadText(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<v1::Config> proto = convert::ConfigFromJson(*text);
  if (!proto.ok()) return InFile(path, proto.status());
  absl::StatusOr<core::Config> config =
      convert::ConfigFromProto(*proto, "config");
  if (!config.ok()) return InFile(path, config.status());
  if (absl::Status s = core::ValidateConfig(*config, "config"); !s.ok()) {
    return InFile(path, s);
  }
  return NamedConfig{Stem(path), *std::move(config)};
}

absl::StatusOr<std::vector<core::Queue>> ReadQueuesFile(
    const std::string& path) {
  absl::StatusOr<std::string> text = ReadText(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<v1::ListQueuesResponse> proto = convert::QueuesFromJson(*text);
  if (!proto.ok()) return InFile(path, proto.status());
  std::vector<core::Queue> queues;
  for (const v1::Queue& queue : proto->queues()) {
    queues.push_back(convert::QueueFromProto(queue));
  }
  if (queues.empty())
    return InFile(path,
                  absl::InvalidArgumentError("queues: must not be empty"));
  return queues;
}

std::vector<std::optional<absl::Duration>> StartErrors(
    const std::vector<TraceJob>& jobs, const PolicyOutcome& outcome) {
  std::vector<std::optional<absl::Duration>> errors(jobs.size());
  for (size_t i = 0; i < jobs.size() && i < outcome.first_starts.size(); ++i) {
    if (jobs[i].recorded_start && outcome.first_starts[i]) {
      errors[i] = *outcome.first_starts[i] - *jobs[i].recorded_start;
    }
  }
  return errors;
}

std::string StartsCsv(const std::vector<TraceJob>& jobs,
                      const std::vector<PolicyOutcome>& outcomes) {
  std::vector<std::string> header = {"gang", "queue", "gpus", "recorded"};
  for (const PolicyOutcome& outcome : outcomes) header.push_back(outcome.name);
  std::string csv = CsvLine(header);
  auto seconds = [](const std::optional<absl::Time>& t) {
    return t ? absl::StrFormat("%.3f",
                               absl::ToDoubleSeconds(*t - absl::UnixEpoch()))
             : std::string();
  };
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!jobs[i].recorded_start) continue;
    std::vector<std::string> row = {jobs[i].gang_id.empty()
                                        ? absl::StrCat("line ", jobs[i].line)
                                        : jobs[i].gang_id,
                                    jobs[i].team, absl::StrCat(jobs[i].gpus),
                                    seconds(jobs[i].recorded_start)};
    for (const PolicyOutcome& outcome : outcomes) {
      row.push_back(i < outcome.first_starts.size()
                        ? seconds(outcome.first_starts[i])
                        : std::string());
    }
    csv += CsvLine(row);
  }
  return csv;
}

std::string QueuesMarkdown(const std::vector<TraceJob>& jobs,
                           const std::vector<PolicyOutcome>& outcomes) {
  std::string md =
      "| queue | policy | finished | wait p50 h | wait p95 h | ≥ 64-GPU p95 h "
      "| GPU-hours | preemptions | Δ p95 h | Δ ≥ 64-GPU p95 h |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const std::vector<std::string>& row : QueueRows(jobs, outcomes)) {
    absl::StrAppend(&md, "| `", row[0], "` | `", row[1], "` |");
    for (size_t c = 2; c < row.size(); ++c)
      absl::StrAppend(&md, " ", row[c], " |");
    md += "\n";
  }
  return md;
}

std::string QueuesCsv(const std::vector<TraceJob>& jobs,
                      const std::vector<PolicyOutcome>& outcomes) {
  std::string csv = absl::StrJoin(kQueueColumns, ",") + "\n";
  for (const std::vector<std::string>& row : QueueRows(jobs, outcomes)) {
    csv += CsvLine(row);
  }
  return csv;
}

}  // namespace phalanx::bench
