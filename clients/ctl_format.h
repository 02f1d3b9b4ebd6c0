// Output building blocks of phalanxctl: terminal-safe text, aligned text
// tables, human durations and times, proto3 JSON printing, and how an RPC
// failure is reported (its stderr line and exit code). Pure functions;
// thread-safe. Table is a value type, thread-compatible.
//
// Every string that comes from the server or from the command line reaches
// the terminal through SafeText or SafeCell (Table calls SafeCell on every
// cell): a label, reason or message can neither send a terminal escape
// sequence nor make the client allocate in proportion to its size times the
// number of rows.
#ifndef PHALANX_CLIENTS_CTL_FORMAT_H_
#define PHALANX_CLIENTS_CTL_FORMAT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/map.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_field.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/support/status.h"

namespace phalanx::ctl {

// Exit codes of phalanxctl.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRpcError = 1;     // the server returned an error
inline constexpr int kExitUsage = 2;        // bad command line or input file
inline constexpr int kExitUnavailable = 3;  // the server could not be reached

// How much of one field is printed, in characters (code points of the
// escaped text, where "\x1b" counts 4): a cell of a list table, the last
// cell of a row (never padded, so it may be longer), and one field of a
// detail view.
inline constexpr size_t kMaxCellColumns = 64;
inline constexpr size_t kMaxLastCellColumns = 256;
inline constexpr size_t kMaxFieldColumns = 4096;

// Returns `text` escaped so that printing it cannot control a terminal:
// bytes below 0x20 and 0x7f print as "\n", "\t", "\r" or "\xNN"; bytes
// that are not valid UTF-8 (stray continuation bytes, overlong forms,
// surrogates, beyond U+10FFFF, cut sequences) as "\xNN" each; the C1
// controls U+0080..U+009F (e.g. CSI U+009B), the line and paragraph
// separators U+2028/U+2029 and the bidirectional controls (U+061C,
// U+200E/F, U+202A..U+202E, U+2066..U+2069) as "\uNNNN". A backslash prints
// as itself. At most `max_columns` characters of the result are kept; when
// the text is longer it is cut at a character boundary and ends in
// "… (N more bytes)", N counted in the original text. Reads at most about
// `max_columns` * 4 bytes of `text`, so its cost does not grow with the
// input.
std::string SafeText(absl::string_view text,
                     size_t max_columns = kMaxFieldColumns);

// SafeText for a table cell: at most `max_columns` characters, a longer
// text cut to `max_columns` - 1 characters and "…".
std::string SafeCell(absl::string_view text,
                     size_t max_columns = kMaxCellColumns);

// Returns the number of characters (UTF-8 code points) of `text`: its
// width on a terminal when every character is one column wide.
size_t DisplayWidth(absl::string_view text);

// Text table whose columns are left-aligned and separated by two spaces.
// Cells pass through SafeCell as they are added, so a table holds and
// prints at most a bounded number of bytes per cell whatever the input.
class Table {
 public:
  // A list table with these column headers (none prints no header line):
  // cells cut at kMaxCellColumns, the last cell of a row at
  // kMaxLastCellColumns.
  explicit Table(const std::vector<std::string>& headers = {});
  // A detail view of "Key:" / value rows: each cell cut at kMaxFieldColumns
  // with a "(N more bytes)" note.
  static Table Fields();
  // Appends a row; missing trailing cells are blank.
  void AddRow(const std::vector<std::string>& cells);
  // Returns whether no row was added.
  bool empty() const { return rows_.empty(); }
  // Returns the table, one line per row, each ending in '\n', without
  // trailing spaces.
  std::string Render() const;

 private:
  struct Cell {
    std::string text;  // escaped and cut
    size_t width = 0;  // DisplayWidth(text)
  };
  // Escapes and cuts `cells` as this table's kind requires.
  std::vector<Cell> MakeCells(const std::vector<std::string>& cells) const;
  // Appends one line, without trailing spaces, to `out`.
  static void AppendLine(const std::vector<Cell>& cells,
                         const std::vector<size_t>& widths, std::string* out);

  bool fields_ = false;
  std::vector<Cell> headers_;
  std::vector<std::vector<Cell>> rows_;
};

// Converts between absl time types and their protobuf counterparts.
google::protobuf::Duration ToProto(absl::Duration duration);
google::protobuf::Timestamp ToProto(absl::Time time);
absl::Time FromProto(const google::protobuf::Timestamp& timestamp);
absl::Duration FromProto(const google::protobuf::Duration& duration);

// Returns `text` with `prefix` before each non-empty line.
std::string Indent(absl::string_view text, absl::string_view prefix = "  ");

// Returns a short human duration: "42s", "5m3s", "17m", "3h4m", "2d5h",
// "12d". Negative durations print as "0s".
std::string HumanDuration(absl::Duration duration);

// Returns `time` as RFC3339 in UTC to the second: "2024-05-01T12:00:03Z".
std::string FormatUtc(absl::Time time);

// Returns "TIME (5m ago)" or "TIME (in 5m)" relative to `now`; "-" when
// `timestamp` is null (an unset field).
std::string TimeAndAge(const google::protobuf::Timestamp* timestamp,
                       absl::Time now);

// Returns ascending GPU indices as ranges: {0,1,2,3,6} -> "0-3,6"; "-" if
// empty.
std::string GpuRanges(const google::protobuf::RepeatedField<int32_t>& gpus);

// Returns "k1=v1,k2=v2" sorted by key; "-" when empty.
std::string JoinMap(const google::protobuf::Map<std::string, std::string>& map);
std::string JoinMap(const google::protobuf::Map<std::string, int64_t>& map);

// Returns an enum value's name without `prefix`: ("GANG_STATE_PENDING",
// "GANG_STATE_") -> "PENDING".
std::string ShortEnumName(absl::string_view full_name,
                          absl::string_view prefix);

// Returns `message` as proto3 JSON with proto field names and every
// primitive field; indented when `pretty`, else one line. Ends in '\n'.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message,
                                   bool pretty);

// Returns `message` as YAML: the fields of ToJson (proto field names, every
// primitive field) in block style. Strings are always double-quoted with
// JSON escapes (valid YAML, and no control character reaches the
// terminal). Ends in '\n'.
absl::StatusOr<std::string> ToYaml(const google::protobuf::Message& message);

// Returns `value` in fixed notation with at most `decimals` decimals and no
// trailing zeros: 0.5625 -> "0.5625", 2 -> "2", 1e-05 -> "0.00001" (6
// decimals), never an exponent.
std::string FixedDecimal(double value, int decimals = 6);

// Returns the canonical name of a gRPC status code, e.g. "NOT_FOUND", or
// "CODE_<n>" for one gRPC does not name. An int, so that a code outside the
// enum's values (a peer may send any) is not an invalid enum value here.
std::string StatusCodeName(int code);

// Returns the stderr line of a failed call, its message through SafeText:
// "phalanxctl: NOT_FOUND: gang_id: no gang \"g-9\"". A reply larger than
// the client's limit gets a hint to raise --max-message-bytes.
std::string RpcErrorLine(const grpc::Status& status);

// Returns the exit code of a finished call: 0 when OK, 3 when UNAVAILABLE
// (the server could not be reached), else 1.
int ExitCodeFor(const grpc::Status& status);

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_FORMAT_H_
