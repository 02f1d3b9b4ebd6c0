#include "bench/sim/trace.h"

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

// Column indices of the header; -1 = absent (only priority and
// checkpoint_interval_s may be absent).
struct Columns {
  int timestamp = -1;
  int duration = -1;
  int num_gpus = -1;
  int cluster = -1;
  int priority = -1;
  int checkpoint_interval = -1;
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
  if (auto it = index.find("priority"); it != index.end()) {
    columns.priority = it->second;
  }
  if (auto it = index.find("checkpoint_interval_s"); it != index.end()) {
    columns.checkpoint_interval = it->second;
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

absl::StatusOr<TraceJob> ParseRow(const std::vector<std::string>& raw,
                                  const Columns& columns, int64_t line) {
  if (raw.size() < columns.required_fields) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", line, ": ", raw.size(),
                     " fields, expected at least ", columns.required_fields));
  }
  auto field = [&](int index) {
    return absl::StripAsciiWhitespace(raw[index]);
  };
  TraceJob job;
  job.line = line;
  const absl::string_view ts = field(columns.timestamp);
  std::optional<absl::Time> submit = ParseTimestamp(ts);
  if (!submit) {
    return Bad(line, "timestamp", ts,
               "is neither \"YYYY-MM-DD HH:MM:SS\" nor seconds");
  }
  job.submit_time = *submit;
  const absl::string_view dur = field(columns.duration);
  double seconds = 0;
  if (!absl::SimpleAtod(dur, &seconds) || !std::isfinite(seconds) ||
      seconds <= 0) {
    return Bad(line, "duration", dur, "is not a positive number of seconds");
  }
  job.duration = absl::Seconds(seconds);
  const absl::string_view gpus = field(columns.num_gpus);
  std::optional<int64_t> n = ParseInteger(gpus);
  if (!n || *n <= 0 || *n > 1000000) {
    return Bad(line, "num_gpus", gpus, "is not a positive integer");
  }
  job.gpus = static_cast<int>(*n);
  job.team = std::string(field(columns.cluster));
  if (job.team.empty()) return Bad(line, "cluster", "", "is empty");
  if (columns.priority >= 0 &&
      static_cast<size_t>(columns.priority) < raw.size() &&
      !field(columns.priority).empty()) {
    const absl::string_view prio = field(columns.priority);
    std::optional<int64_t> p = ParseInteger(prio);
    if (!p || *p < -1000000000 || *p > 1000000000) {
      return Bad(line, "priority", prio, "is not an integer");
    }
    job.priority = static_cast<int>(*p);
  }
  if (columns.checkpoint_interval >= 0 &&
      static_cast<size_t>(columns.checkpoint_interval) < raw.size() &&
      !field(columns.checkpoint_interval).empty()) {
    const absl::string_view text = field(columns.checkpoint_interval);
    double interval = 0;
    if (!absl::SimpleAtod(text, &interval) || !std::isfinite(interval) ||
        interval < 0) {
      return Bad(line, "checkpoint_interval_s", text,
                 "is not a number of seconds >= 0");
    }
    job.checkpoint_interval = absl::Seconds(interval);
  }
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
    absl::StatusOr<TraceJob> job =
        ParseRow(SplitCsvLine(lines[i]), *columns, static_cast<int64_t>(i) + 1);
    if (!job.ok()) return job.status();
    jobs.push_back(*std::move(job));
  }
  return jobs;
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
