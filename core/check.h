// PHALANX_CHECK: aborts the process with a message when an invariant is
// broken. Debian's Abseil (20220623) has no ABSL_CHECK. Thread-safe.
#ifndef PHALANX_CORE_CHECK_H_
#define PHALANX_CORE_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define PHALANX_CHECK(cond)                                                 \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                  \
      std::abort();                                                         \
    }                                                                       \
  } while (false)

#endif  // PHALANX_CORE_CHECK_H_
