#include "clients/ctl_history.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "clients/ctl_flag_checks.h"
#include "clients/ctl_format.h"
#include "clients/ctl_views.h"

namespace phalanx::ctl {
namespace {

// Seconds as a decimal, exact to the nanosecond, no trailing zeros
// ("1700000000", "12.5").
std::string DecimalSeconds(int64_t seconds, int32_t nanos) {
  if (nanos == 0) return absl::StrCat(seconds);
  std::string text = absl::StrFormat(
      "%s%d.%09d", seconds < 0 || nanos < 0 ? "-" : "",
      seconds < 0 ? -seconds : seconds, nanos < 0 ? -nanos : nanos);
  while (text.back() == '0') text.pop_back();
  return text;
}

// A Timestamp's nanos are never negative (-1.5 s is -2 s + 0.5 s), unlike
// a Duration's, which carry the sign of its seconds.
std::string Seconds(const google::protobuf::Timestamp& time) {
  if (time.seconds() < 0 && time.nanos() > 0) {
    return DecimalSeconds(time.seconds() + 1, time.nanos() - 1'000'000'000);
  }
  return DecimalSeconds(time.seconds(), time.nanos());
}

std::string Seconds(const google::protobuf::Duration& duration) {
  return DecimalSeconds(duration.seconds(), duration.nanos());
}

// A CSV field: quoted when it holds a comma, a quote or a line break, a
// quote doubled inside.
std::string CsvField(absl::string_view text) {
  if (text.find_first_of(",\"\r\n") == absl::string_view::npos) {
    return std::string(text);
  }
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

// "required:rack", "preferred:block", or "" when unconstrained.
std::string TopologyText(const v1::TopologyConstraint& topology) {
  if (topology.mode() == v1::TOPOLOGY_MODE_REQUIRED) {
    return absl::StrCat("required:", topology.level());
  }
  if (topology.mode() == v1::TOPOLOGY_MODE_PREFERRED) {
    return absl::StrCat("preferred:", topology.level());
  }
  return "";
}

// The pod-set columns: one value per pod set, joined with ';'.
struct PodSetColumns {
  int64_t total_gpus = 0;
  std::vector<std::string> pods, gpus_per_pod, models, topology;
};

PodSetColumns PodSetsOf(const v1::HistoryRecord& record) {
  PodSetColumns columns;
  for (const v1::PodSet& set : record.pod_sets()) {
    columns.pods.push_back(absl::StrCat(set.count()));
    columns.total_gpus += static_cast<int64_t>(set.count()) * set.gpus();
    columns.gpus_per_pod.push_back(absl::StrCat(set.gpus()));
    columns.models.push_back(absl::StrJoin(set.gpu_models(), "|"));
    columns.topology.push_back(TopologyText(set.topology()));
  }
  return columns;
}

}  // namespace

absl::StatusOr<std::variant<absl::Duration, absl::Time>> ParseSince(
    absl::string_view text) {
  if (absl::StatusOr<absl::Time> time = ParseRfc3339(text); time.ok()) {
    return *time;
  }
  absl::string_view days_text = text;
  double days = 0;
  if (absl::ConsumeSuffix(&days_text, "d") &&
      absl::SimpleAtod(days_text, &days) && days > 0 && days < 1e6) {
    return absl::Hours(24 * days);
  }
  if (absl::StatusOr<absl::Duration> ago = ParseDuration(text); ago.ok()) {
    return *ago;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "want how long ago such as 7d or 36h, or an RFC3339 time, got \"%s\"",
      SafeCell(text)));
}

v1::ExportHistoryRequest BuildHistoryRequest(const HistoryOptions& options,
                                             absl::Time now) {
  v1::ExportHistoryRequest request;
  request.set_page_size(kMaxHistoryPageSize);
  request.set_include_labels(options.include_labels);
  if (options.since.has_value()) {
    const absl::Time since =
        std::holds_alternative<absl::Time>(*options.since)
            ? std::get<absl::Time>(*options.since)
            : now - std::get<absl::Duration>(*options.since);
    *request.mutable_since() = ToProto(since);
  }
  return request;
}

std::string HistoryCsvHeader(bool labels) {
  return absl::StrCat(
      "timestamp,duration,num_gpus,cluster,priority,checkpoint_interval_s,"
      "complete,gang_id,state,pods,gpus_per_pod,gpu_model,topology,start,"
      "finish,attempts,preemptions,estimated_runtime_s,max_runtime_s",
      labels ? ",labels\n" : "\n");
}

std::string HistoryCsvRow(const v1::HistoryRecord& record, bool labels) {
  const bool started = record.has_first_admit_time();
  const PodSetColumns sets = PodSetsOf(record);
  std::vector<std::string> fields = {
      Seconds(record.submit_time()),
      started ? Seconds(record.run_time()) : "",
      absl::StrCat(sets.total_gpus),
      record.queue(),
      absl::StrCat(record.priority()),
      "",  // a gang spec has no checkpoint interval
      started && IsFinalState(record.state()) ? "1" : "0",
      record.gang_id(),
      GangStateName(record.state()),
      absl::StrJoin(sets.pods, ";"),
      absl::StrJoin(sets.gpus_per_pod, ";"),
      absl::StrJoin(sets.models, ";"),
      absl::StrJoin(sets.topology, ";"),
      started ? Seconds(record.first_admit_time()) : "",
      record.has_finish_time() ? Seconds(record.finish_time()) : "",
      absl::StrCat(record.attempts()),
      absl::StrCat(record.preemptions()),
      record.has_estimated_runtime() ? Seconds(record.estimated_runtime()) : "",
      record.has_max_runtime() ? Seconds(record.max_runtime()) : "",
  };
  if (labels) {
    // Sorted by key (the map's order is not).
    std::map<std::string, std::string> sorted(record.labels().begin(),
                                              record.labels().end());
    fields.push_back(absl::StrJoin(sorted, ";", absl::PairFormatter("=")));
  }
  std::vector<std::string> quoted;
  quoted.reserve(fields.size());
  for (const std::string& field : fields) quoted.push_back(CsvField(field));
  return absl::StrCat(absl::StrJoin(quoted, ","), "\n");
}

}  // namespace phalanx::ctl
