#include "bench/json.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_format.h"

namespace phalanx::bench {

Json JsonNumber(double value, int significant_digits) {
  if (!std::isfinite(value)) return nullptr;
  const std::string text = absl::StrFormat("%.*g", significant_digits, value);
  const double rounded = std::strtod(text.c_str(), nullptr);
  constexpr double kExactIntegers = 9007199254740992.0;  // 2^53
  if (rounded == std::trunc(rounded) && std::fabs(rounded) < kExactIntegers) {
    return static_cast<int64_t>(rounded);
  }
  return rounded;
}

std::string DumpJson(const Json& json, int indent) {
  return json.dump(indent, ' ', /*ensure_ascii=*/false,
                   Json::error_handler_t::replace);
}

JsonObject& JsonObject::Add(const std::string& key, double value) {
  json_[key] = JsonNumber(value, 6);
  return *this;
}

JsonObject& JsonObject::Add(const std::string& key, int64_t value) {
  json_[key] = value;
  return *this;
}

JsonObject& JsonObject::Add(const std::string& key, bool value) {
  json_[key] = value;
  return *this;
}

JsonObject& JsonObject::Add(const std::string& key, const std::string& value) {
  json_[key] = value;
  return *this;
}

JsonObject& JsonObject::Add(const std::string& key, const JsonObject& value) {
  json_[key] = value.json_;
  return *this;
}

}  // namespace phalanx::bench
