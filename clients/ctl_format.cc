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
#include "nlohmann/json.hpp"

namespace phalanx::ctl {
namespace {

// Decodes the UTF-8 character at the start of `text` (not empty) into
// `*code_point`. Returns its length in bytes, or 0 when `text` does not
// start with a complete, shortest-form encoding of a Unicode scalar value.
size_t DecodeUtf8(absl::string_view text, char32_t* code_point) {
  const auto byte = [text](size_t i) {
    return static_cast<unsigned char>(text[i]);
  };
  const unsigned char first = byte(0);
  if (first < 0x80) {
    *code_point = first;
    return 1;
  }
  size_t length;
  char32_t smallest;
  char32_t value;
  if ((first & 0xE0) == 0xC0) {
    length = 2, smallest = 0x80, value = first & 0x1F;
  } else if ((first & 0xF0) == 0xE0) {
    length = 3, smallest = 0x800, value = first & 0x0F;
  } else if ((first & 0xF8) == 0xF0) {
    length = 4, smallest = 0x10000, value = first & 0x07;
  } else {
    return 0;  // a continuation byte, or 0xF8..0xFF
  }
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    value = (value << 6) | (byte(i) & 0x3F);
  }
  if (value < smallest || value > 0x10FFFF ||
      (value >= 0xD800 && value <= 0xDFFF)) {
    return 0;
  }
  *code_point = value;
  return length;
}

// Whether printing `code_point` could move the cursor, start an escape
// sequence or reorder the text around it: C0 and C1 controls, DEL, the line
// and paragraph separators and the bidirectional formatting characters.
bool IsUnsafe(char32_t code_point) {
  return code_point < 0x20 || (code_point >= 0x7F && code_point <= 0x9F) ||
         code_point == 0x061C || code_point == 0x200E || code_point == 0x200F ||
         (code_point >= 0x2028 && code_point <= 0x202E) ||
         (code_point >= 0x2066 && code_point <= 0x2069);
}

// The escaped form of one unsafe character.
std::string EscapeCodePoint(char32_t code_point) {
  switch (code_point) {
    case '\n':
      return "\\n";
    case '\t':
      return "\\t";
    case '\r':
      return "\\r";
    default:
      return code_point < 0x80
                 ? absl::StrFormat("\\x%02x", static_cast<int>(code_point))
                 : absl::StrFormat("\\u%04x", static_cast<int>(code_point));
  }
}

// What Escape produced: the escaped text, how many input bytes it covers,
// and whether that is all of the input.
struct Escaped {
  std::string text;
  size_t consumed = 0;
  bool complete = true;
};

// The one escaper behind SafeText and SafeCell. Escapes `text` character by
// character while the result stays within `max_columns` characters; when the
// next character would pass that, the result is cut back to the last
// character boundary at or below `cut_columns` and marked incomplete.
Escaped Escape(absl::string_view text, size_t max_columns, size_t cut_columns) {
  Escaped result;
  size_t columns = 0;
  size_t cut_bytes = 0;     // result.text.size() at the cut point
  size_t cut_consumed = 0;  // input bytes covered at the cut point
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t code_point = 0;
    const size_t length = DecodeUtf8(text.substr(pos), &code_point);
    std::string escaped;
    if (length == 0) {
      escaped =
          absl::StrFormat("\\x%02x", static_cast<unsigned char>(text[pos]));
    } else if (IsUnsafe(code_point)) {
      escaped = EscapeCodePoint(code_point);
    }
    const size_t width = escaped.empty() ? 1 : escaped.size();
    if (columns + width > max_columns) {
      result.text.resize(cut_bytes);
      result.consumed = cut_consumed;
      result.complete = false;
      return result;
    }
    if (escaped.empty()) {
      result.text.append(text.data() + pos, length);
    } else {
      result.text += escaped;
    }
    columns += width;
    pos += length == 0 ? 1 : length;
    if (columns <= cut_columns) {
      cut_bytes = result.text.size();
      cut_consumed = pos;
    }
  }
  result.consumed = pos;
  return result;
}

constexpr char kEllipsis[] = "\u2026";  // …

template <typename Value>
std::string JoinSortedMap(
    const google::protobuf::Map<std::string, Value>& map) {
  if (map.empty()) return "-";
  const std::map<std::string, Value> sorted(map.begin(), map.end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

}  // namespace

std::string SafeText(absl::string_view text, size_t max_columns) {
  Escaped escaped = Escape(text, max_columns, max_columns);
  if (!escaped.complete) {
    absl::StrAppend(&escaped.text, kEllipsis, " (",
                    text.size() - escaped.consumed, " more bytes)");
  }
  return std::move(escaped.text);
}

std::string SafeCell(absl::string_view text, size_t max_columns) {
  max_columns = std::max<size_t>(max_columns, 1);
  Escaped escaped = Escape(text, max_columns, max_columns - 1);
  if (!escaped.complete) escaped.text += kEllipsis;
  return std::move(escaped.text);
}

size_t DisplayWidth(absl::string_view text) {
  size_t width = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++width;
  }
  return width;
}

Table::Table(const std::vector<std::string>& headers) {
  headers_ = MakeCells(headers);
}

Table Table::Fields() {
  Table table;
  table.fields_ = true;
  return table;
}

std::vector<Table::Cell> Table::MakeCells(
    const std::vector<std::string>& cells) const {
  std::vector<Cell> out;
  out.reserve(cells.size());
  for (size_t i = 0; i < cells.size(); ++i) {
    std::string text;
    if (fields_) {
      text = SafeText(cells[i], kMaxFieldColumns);
    } else {
      const bool last = i + 1 == std::max(headers_.size(), cells.size());
      text = SafeCell(cells[i], last ? kMaxLastCellColumns : kMaxCellColumns);
    }
    const size_t width = DisplayWidth(text);
    out.push_back({std::move(text), width});
  }
  return out;
}

void Table::AddRow(const std::vector<std::string>& cells) {
  rows_.push_back(MakeCells(cells));
}

// Every cell but the last is padded to its column's width, which is at most
// the longest cut cell: a line costs at most the sum of the column caps.
void Table::AppendLine(const std::vector<Cell>& cells,
                       const std::vector<size_t>& widths, std::string* out) {
  const size_t start = out->size();
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) out->append(2, ' ');
    out->append(cells[i].text);
    if (i + 1 < cells.size()) out->append(widths[i] - cells[i].width, ' ');
  }
  size_t end = out->size();
  while (end > start && (*out)[end - 1] == ' ') --end;
  out->resize(end);
  out->push_back('\n');
}

std::string Table::Render() const {
  size_t columns = headers_.size();
  for (const auto& row : rows_) columns = std::max(columns, row.size());
  std::vector<size_t> widths(columns, 0);
  auto measure = [&widths](const std::vector<Cell>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      widths[i] = std::max(widths[i], cells[i].width);
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

namespace {

using Json = nlohmann::ordered_json;

// A YAML key: bare when it is an identifier, else double-quoted.
std::string YamlKey(const std::string& key) {
  const bool bare =
      !key.empty() &&
      !absl::ascii_isdigit(static_cast<unsigned char>(key[0])) &&
      std::all_of(key.begin(), key.end(), [](char c) {
        return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
      });
  return bare ? key : Json(key).dump(-1, ' ', true);
}

void AppendYaml(const Json& value, int indent, std::string* out);

// A value after "key:" or "-": scalars and empty containers inline, others
// on the next lines, indented.
void AppendYamlValue(const Json& value, int indent, std::string* out) {
  if ((value.is_object() || value.is_array()) && !value.empty()) {
    absl::StrAppend(out, "\n");
    AppendYaml(value, indent, out);
    return;
  }
  absl::StrAppend(out, " ", value.dump(-1, ' ', true), "\n");
}

void AppendYaml(const Json& value, int indent, std::string* out) {
  const std::string pad(indent, ' ');
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      absl::StrAppend(out, pad, YamlKey(key), ":");
      AppendYamlValue(item, indent + 2, out);
    }
  } else if (value.is_array()) {
    for (const Json& item : value) {
      absl::StrAppend(out, pad, "-");
      AppendYamlValue(item, indent + 2, out);
    }
  } else {
    absl::StrAppend(out, pad, value.dump(-1, ' ', true), "\n");
  }
}

}  // namespace

absl::StatusOr<std::string> ToYaml(const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = ToJson(message, /*pretty=*/false);
  if (!json.ok()) return json.status();
  // protobuf's JSON is valid; its field order is kept (ordered_json).
  const Json parsed = Json::parse(*json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return absl::InternalError("cannot print YAML");
  if (parsed.empty()) return std::string("{}\n");
  std::string out;
  AppendYaml(parsed, 0, &out);
  return out;
}

std::string FixedDecimal(double value, int decimals) {
  std::string text = absl::StrFormat("%.*f", decimals, value);
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  if (text == "-0") text = "0";
  return text;
}

std::string StatusCodeName(int code) {
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
      return absl::StrCat("CODE_", code);
  }
}

std::string RpcErrorLine(const grpc::Status& status) {
  std::string line =
      absl::StrCat("phalanxctl: ", StatusCodeName(status.error_code()));
  if (!status.error_message().empty()) {
    absl::StrAppend(&line, ": ", SafeText(status.error_message()));
  }
  // gRPC's own message when a reply passes the channel's receive limit.
  if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
      absl::StartsWith(status.error_message(),
                       "Received message larger than max")) {
    absl::StrAppend(&line, " (raise --max-message-bytes)");
  }
  return line;
}

int ExitCodeFor(const grpc::Status& status) {
  if (status.ok()) return kExitOk;
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ? kExitUnavailable
                                                              : kExitRpcError;
}

}  // namespace phalanx::ctl
