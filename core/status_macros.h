// RETURN_IF_ERROR and ASSIGN_OR_RETURN, which Debian's Abseil lacks. Kept in
// this one place.
#ifndef PHALANX_CORE_STATUS_MACROS_H_
#define PHALANX_CORE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PHALANX_CONCAT_INNER(a, b) a##b
#define PHALANX_CONCAT(a, b) PHALANX_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(expr)                           \
  do {                                                  \
    if (absl::Status status_ = (expr); !status_.ok()) { \
      return status_;                                   \
    }                                                   \
  } while (false)

// Declares/assigns `lhs` from the StatusOr `expr`, or returns its status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(PHALANX_CONCAT(statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(*tmp)

#endif  // PHALANX_CORE_STATUS_MACROS_H_
