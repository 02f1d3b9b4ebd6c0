#include "clients/ctl_format.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"

namespace phalanx::ctl {
namespace {

// Appends one table line: every cell but the last padded to its column.
void AppendLine(const std::vector<std::string>& cells,
                const std::vector<size_t>& widths, std::string* out) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) line.append(2, ' ');
    line += cells[i];
    if (i + 1 < cells.size()) line.append(widths[i] - cells[i].size(), ' ');
  }
  absl::StrAppend(out, absl::StripTrailingAsciiWhitespace(line), "\n");
}

template <typename Value>
std::string JoinSortedMap(
    const google::protobuf::Map<std::string, Value>& map) {
  if (map.empty()) return "-";
  const std::map<std::string, Value> sorted(map.begin(), map.end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

}  // namespace

Table::Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}

void Table::AddRow(std::vector<std::string> cells) {
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  size_t columns = headers_.size();
  for (const auto& row : rows_) columns = std::max(columns, row.size());
  std::vector<size_t> widths(columns, 0);
  auto measure = [&widths](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      widths[i] = std::max(widths[i], cells[i].size());
    }
  };
  measure(headers_);
  for (const auto& row : rows_) measure(row);
  std::string out;
  if (!headers_.empty()) AppendLine(headers_, widths, &out);
  for (const auto& row : rows_) AppendLine(row, widths, &out);
  return out;
}

google::protobuf::Duration ToProto(absl::Duration duration) {
  absl::Duration rest;
  const int64_t seconds = absl::IDivDuration(duration, absl::Seconds(1), &rest);
  google::protobuf::Duration out;
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(rest)));
  return out;
}

google::protobuf::Timestamp ToProto(absl::Time time) {
  const int64_t seconds = absl::ToUnixSeconds(time);
  google::protobuf::Timestamp out;
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(time - absl::FromUnixSeconds(seconds))));
  return out;
}

absl::Time FromProto(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) +
         absl::Nanoseconds(timestamp.nanos());
}

absl::Duration FromProto(const google::protobuf::Duration& duration) {
  return absl::Seconds(duration.seconds()) +
         absl::Nanoseconds(duration.nanos());
}

std::string Indent(absl::string_view text, absl::string_view prefix) {
  std::string out;
  bool first = true;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!first) out += "\n";
    first = false;
    if (!line.empty()) absl::StrAppend(&out, prefix, line);
  }
  return out;
}

std::string HumanDuration(absl::Duration duration) {
  const int64_t s = std::max<int64_t>(0, absl::ToInt64Seconds(duration));
  auto two = [](int64_t big, const char* big_unit, int64_t small,
                const char* small_unit) {
    return small == 0 ? absl::StrCat(big, big_unit)
                      : absl::StrCat(big, big_unit, small, small_unit);
  };
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 10 * 60) return two(s / 60, "m", s % 60, "s");
  if (s < 3600) return absl::StrCat(s / 60, "m");
  if (s < 86400) return two(s / 3600, "h", s % 3600 / 60, "m");
  if (s < 7 * 86400) return two(s / 86400, "d", s % 86400 / 3600, "h");
  return absl::StrCat(s / 86400, "d");
}

std::string FormatUtc(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", time, absl::UTCTimeZone());
}

std::string TimeAndAge(const google::protobuf::Timestamp* timestamp,
                       absl::Time now) {
  if (timestamp == nullptr) return "-";
  const absl::Time time = FromProto(*timestamp);
  const std::string when = time <= now
                               ? absl::StrCat(HumanDuration(now - time), " ago")
                               : absl::StrCat("in ", HumanDuration(time - now));
  return absl::StrCat(FormatUtc(time), " (", when, ")");
}

std::string GpuRanges(const google::protobuf::RepeatedField<int32_t>& gpus) {
  if (gpus.empty()) return "-";
  std::vector<std::string> parts;
  int i = 0;
  while (i < gpus.size()) {
    int j = i;
    while (j + 1 < gpus.size() && gpus[j + 1] == gpus[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(gpus[i])
                           : absl::StrCat(gpus[i], "-", gpus[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

std::string JoinMap(
    const google::protobuf::Map<std::string, std::string>& map) {
  return JoinSortedMap(map);
}

std::string JoinMap(const google::protobuf::Map<std::string, int64_t>& map) {
  return JoinSortedMap(map);
}

std::string ShortEnumName(absl::string_view full_name,
                          absl::string_view prefix) {
  absl::ConsumePrefix(&full_name, prefix);
  return std::string(full_name);
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message,
                                   bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  const auto status =
      google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print JSON: ", status.ToString()));
  }
  return absl::StrCat(absl::StripTrailingAsciiWhitespace(out), "\n");
}

std::string StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    default:
      return absl::StrCat("CODE_", static_cast<int>(code));
  }
}

std::string RpcErrorLine(const grpc::Status& status) {
  std::string line =
      absl::StrCat("phalanxctl: ", StatusCodeName(status.error_code()));
  if (!status.error_message().empty()) {
    absl::StrAppend(&line, ": ", status.error_message());
  }
  return line;
}

int ExitCodeFor(const grpc::Status& status) {
  if (status.ok()) return kExitOk;
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ? kExitUnavailable
                                                              : kExitRpcError;
}

}  // namespace phalanx::ctl
