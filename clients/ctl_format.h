// Output building blocks of phalanxctl: aligned text tables, human durations
// and times, proto3 JSON printing, and how an RPC failure is reported (its
// stderr line and exit code). Pure functions; thread-safe. Table is a value
// type, thread-compatible.
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

// Text table whose columns are left-aligned and separated by two spaces.
class Table {
 public:
  // A table with these column headers; none prints no header line.
  explicit Table(std::vector<std::string> headers = {});
  // Appends a row; missing trailing cells are blank.
  void AddRow(std::vector<std::string> cells);
  // Returns whether no row was added.
  bool empty() const { return rows_.empty(); }
  // Returns the table, one line per row, each ending in '\n', without
  // trailing spaces.
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
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

// Returns the canonical name of a gRPC status code, e.g. "NOT_FOUND".
std::string StatusCodeName(grpc::StatusCode code);

// Returns the stderr line of a failed call:
// "phalanxctl: NOT_FOUND: gang_id: no gang \"g-9\"".
std::string RpcErrorLine(const grpc::Status& status);

// Returns the exit code of a finished call: 0 when OK, 3 when UNAVAILABLE
// (the server could not be reached), else 1.
int ExitCodeFor(const grpc::Status& status);

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_FORMAT_H_
