#include "bench/json.h"

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace phalanx::bench {
namespace {

constexpr int kMaxDepth = 64;

// Recursive descent over `text_`; `pos_` is the next unread byte.
class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> Document() {
    JsonValue value;
    if (absl::Status s = Value(value, 0); !s.ok()) return s;
    SkipSpace();
    if (pos_ != text_.size()) return Error("trailing characters");
    return value;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("offset ", pos_, ": ", what));
  }

  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
            text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(absl::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  absl::Status Value(JsonValue& out, int depth) {
    if (depth > kMaxDepth) return Error("nested too deeply");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("unexpected end of input");
    const char c = text_[pos_];
    if (c == '{') return Object(out, depth);
    if (c == '[') return Array(out, depth);
    if (c == '"') {
      out.type = JsonValue::Type::kString;
      return String(out.text);
    }
    if (Consume("true")) {
      out.type = JsonValue::Type::kBool;
      out.boolean = true;
      return absl::OkStatus();
    }
    if (Consume("false")) {
      out.type = JsonValue::Type::kBool;
      return absl::OkStatus();
    }
    if (Consume("null")) return absl::OkStatus();
    return Number(out);
  }

  absl::Status Object(JsonValue& out, int depth) {
    out.type = JsonValue::Type::kObject;
    ++pos_;  // '{'
    SkipSpace();
    if (Consume("}")) return absl::OkStatus();
    while (true) {
      SkipSpace();
      std::string key;
      if (pos_ >= text_.size() || text_[pos_] != '"') {
        return Error("expected a member name");
      }
      if (absl::Status s = String(key); !s.ok()) return s;
      SkipSpace();
      if (!Consume(":")) return Error("expected ':'");
      JsonValue value;
      if (absl::Status s = Value(value, depth + 1); !s.ok()) return s;
      out.members.emplace_back(std::move(key), std::move(value));
      SkipSpace();
      if (Consume("}")) return absl::OkStatus();
      if (!Consume(",")) return Error("expected ',' or '}'");
    }
  }

  absl::Status Array(JsonValue& out, int depth) {
    out.type = JsonValue::Type::kArray;
    ++pos_;  // '['
    SkipSpace();
    if (Consume("]")) return absl::OkStatus();
    while (true) {
      JsonValue value;
      if (absl::Status s = Value(value, depth + 1); !s.ok()) return s;
      out.items.push_back(std::move(value));
      SkipSpace();
      if (Consume("]")) return absl::OkStatus();
      if (!Consume(",")) return Error("expected ',' or ']'");
    }
  }

  absl::Status Number(JsonValue& out) {
    const size_t begin = pos_;
    while (pos_ < text_.size() &&
           (absl::ascii_isdigit(text_[pos_]) || text_[pos_] == '-' ||
            text_[pos_] == '+' || text_[pos_] == '.' || text_[pos_] == 'e' ||
            text_[pos_] == 'E')) {
      ++pos_;
    }
    out.text = std::string(text_.substr(begin, pos_ - begin));
    if (out.text.empty() || !absl::SimpleAtod(out.text, &out.number) ||
        !std::isfinite(out.number)) {
      pos_ = begin;
      return Error("expected a value");
    }
    out.type = JsonValue::Type::kNumber;
    return absl::OkStatus();
  }

  absl::Status Hex4(uint32_t& code) {
    if (pos_ + 4 > text_.size()) return Error("short \\u escape");
    code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      code <<= 4;
      if (h >= '0' && h <= '9')
        code |= h - '0';
      else if (h >= 'a' && h <= 'f')
        code |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        code |= h - 'A' + 10;
      else
        return Error("bad \\u escape");
    }
    return absl::OkStatus();
  }

  static void AppendUtf8(uint32_t code, std::string& out) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  absl::Status Escape(std::string& out) {
    if (pos_ >= text_.size()) return Error("unterminated string");
    const char e = text_[pos_++];
    switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        return absl::OkStatus();
      case 'b':
        out += '\b';
        return absl::OkStatus();
      case 'f':
        out += '\f';
        return absl::OkStatus();
      case 'n':
        out += '\n';
        return absl::OkStatus();
      case 'r':
        out += '\r';
        return absl::OkStatus();
      case 't':
        out += '\t';
        return absl::OkStatus();
      case 'u':
        break;
      default:
        return Error("bad escape");
    }
    uint32_t code = 0;
    if (absl::Status s = Hex4(code); !s.ok()) return s;
    if (code >= 0xD800 && code < 0xDC00) {
      uint32_t low = 0;
      if (!Consume("\\u")) return Error("unpaired surrogate");
      if (absl::Status s = Hex4(low); !s.ok()) return s;
      if (low < 0xDC00 || low >= 0xE000) return Error("unpaired surrogate");
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    AppendUtf8(code, out);
    return absl::OkStatus();
  }

  absl::Status String(std::string& out) {
    ++pos_;  // '"'
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return absl::OkStatus();
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("control character in string");
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (absl::Status s = Escape(out); !s.ok()) return s;
    }
    return Error("unterminated string");
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::Find(absl::string_view key) const {
  for (const auto& [name, value] : members) {
    if (name == key) return &value;
  }
  return nullptr;
}

std::optional<int64_t> JsonValue::AsInt() const {
  int64_t value = 0;
  if ((type == Type::kNumber || type == Type::kString) &&
      absl::SimpleAtoi(text, &value)) {
    return value;
  }
  if (type == Type::kNumber && number == std::floor(number) &&
      std::fabs(number) < 9e15) {
    return static_cast<int64_t>(number);
  }
  return std::nullopt;
}

absl::StatusOr<JsonValue> ParseJson(absl::string_view text) {
  return Parser(text).Document();
}

}  // namespace phalanx::bench
