// Strong identifier types: a GangId cannot be passed where a NodeId is
// expected. Values are plain strings; ordering is lexicographic. Immutable
// values, thread-compatible.
#ifndef PHALANX_CORE_IDS_H_
#define PHALANX_CORE_IDS_H_

#include <compare>
#include <cstddef>
#include <cstdint>
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

// A gang's dense handle inside core: a small integer the GangTable hands
// out when a gang's record is first stored and takes back when it is
// erased (then it may name another gang). Hot paths index by it instead of
// hashing and comparing id strings; ids stay strings at the API and in
// storage, and every decision that depends on order still sorts by id.
enum class GangHandle : uint32_t {};
// No gang in a table. A fleet also takes it for the transient allocations
// of gangs that are not stored (placement and repair probes, each undone
// before the call that made it returns).
inline constexpr GangHandle kNoGang = static_cast<GangHandle>(~uint32_t{0});
inline size_t IndexOf(GangHandle handle) { return static_cast<size_t>(handle); }

}  // namespace phalanx::core

#endif  // PHALANX_CORE_IDS_H_
