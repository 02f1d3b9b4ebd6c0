// Quoting client input in error messages: at most 64 bytes of it, with
// control characters and non-ASCII bytes escaped, so a hostile id can neither
// blow up an error message (and the client's metadata limit) nor reach a
// terminal or log as an escape sequence. Stateless; thread-safe.
#ifndef PHALANX_CORE_QUOTE_H_
#define PHALANX_CORE_QUOTE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace phalanx::core {

inline constexpr size_t kMaxQuotedBytes = 64;

// Returns `text` in double quotes: its first 64 bytes, bytes outside
// printable ASCII (and '"', '\\') escaped as \xNN, and "…(N bytes)" appended
// when it was cut.
std::string QuoteForError(absl::string_view text);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_QUOTE_H_
