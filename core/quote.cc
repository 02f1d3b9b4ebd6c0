#include "core/quote.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace phalanx::core {

std::string QuoteForError(absl::string_view text) {
  std::string out = "\"";
  const absl::string_view shown = text.substr(0, kMaxQuotedBytes);
  for (unsigned char c : shown) {
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  if (shown.size() < text.size()) {
    absl::StrAppend(&out, "…(", text.size(), " bytes)");
  }
  return out;
}

}  // namespace phalanx::core
