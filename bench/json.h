// A small JSON reader for the simulator's --fleet file (proto3 JSON of
// phalanx.v1.UpsertNodesRequest). bench/ may not link protobuf; this covers
// RFC 8259 values with \uXXXX escapes (surrogate pairs included) and keeps
// object members in file order. Values are plain data; thread-compatible.
#ifndef PHALANX_BENCH_JSON_H_
#define PHALANX_BENCH_JSON_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace phalanx::bench {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;  // a string's value, or a number as written
  std::vector<JsonValue> items;
  std::vector<std::pair<std::string, JsonValue>> members;

  // Returns the first member named `key`, or nullptr (also for non-objects).
  const JsonValue* Find(absl::string_view key) const;
  // A number, or a string holding an integer (proto3 JSON writes int64 as a
  // string); nullopt otherwise.
  std::optional<int64_t> AsInt() const;
};

// Parses one JSON document. InvalidArgument "offset N: ..." when malformed.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_JSON_H_
