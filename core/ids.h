// Strong identifier types: a GangId cannot be passed where a NodeId is
// expected. Values are plain strings; ordering is lexicographic. Immutable
// values, thread-compatible.
#ifndef PHALANX_CORE_IDS_H_
#define PHALANX_CORE_IDS_H_

#include <compare>
#include <ostream>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace phalanx::core {

template <typename Tag>
class StrongId {
 public:
  StrongId() = default;
  explicit StrongId(std::string value) : value_(std::move(value)) {}
  explicit StrongId(absl::string_view value) : value_(value) {}
  explicit StrongId(const char* value) : value_(value) {}

  const std::string& value() const { return value_; }
  bool empty() const { return value_.empty(); }

  auto operator<=>(const StrongId&) const = default;
  bool operator==(const StrongId&) const = default;

  template <typename H>
  friend H AbslHashValue(H h, const StrongId& id) {
    return H::combine(std::move(h), id.value_);
  }
  friend std::ostream& operator<<(std::ostream& os, const StrongId& id) {
    return os << id.value_;
  }

 private:
  std::string value_;
};

using GangId = StrongId<struct GangIdTag>;
using NodeId = StrongId<struct NodeIdTag>;
using QueueName = StrongId<struct QueueNameTag>;

}  // namespace phalanx::core

#endif  // PHALANX_CORE_IDS_H_
