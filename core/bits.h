// Bit counting for GPU masks, inline on every x86-64: std::popcount
// becomes a library call when the compiler may not assume the POPCNT
// instruction, and free-GPU counts sit on the placement's hottest path.
#ifndef PHALANX_CORE_BITS_H_
#define PHALANX_CORE_BITS_H_

#include <cstdint>

namespace phalanx::core {

// The number of bits set in `mask` (the classic SWAR count).
constexpr int CountOnes(uint64_t mask) {
  mask -= (mask >> 1) & 0x5555555555555555ULL;
  mask = (mask & 0x3333333333333333ULL) + ((mask >> 2) & 0x3333333333333333ULL);
  mask = (mask + (mask >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
  return static_cast<int>((mask * 0x0101010101010101ULL) >> 56);
}

static_assert(CountOnes(0) == 0 && CountOnes(1) == 1 && CountOnes(0xFF) == 8 &&
              CountOnes(~0ULL) == 64 && CountOnes(0x8000000000000001ULL) == 2);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_BITS_H_
