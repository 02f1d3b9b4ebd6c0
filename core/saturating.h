// Integer sums that cannot overflow: quotas come from clients, and a sum of
// quotas that wrapped around would turn "lends everything" into "lends
// -9223372036854775729". Stateless; thread-safe.
#ifndef PHALANX_CORE_SATURATING_H_
#define PHALANX_CORE_SATURATING_H_

#include <cstdint>
#include <limits>

namespace phalanx::core {

// a + b, clamped to the int64_t range.
constexpr int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<int64_t>::max()
               : std::numeric_limits<int64_t>::min();
}

// a - b, clamped to the int64_t range.
constexpr int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t difference = 0;
  if (!__builtin_sub_overflow(a, b, &difference)) return difference;
  return b < 0 ? std::numeric_limits<int64_t>::max()
               : std::numeric_limits<int64_t>::min();
}

}  // namespace phalanx::core

#endif  // PHALANX_CORE_SATURATING_H_
