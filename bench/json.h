// JSON values for the bench tools' output, built on nlohmann::ordered_json
// (members keep insertion order): numbers rounded to a fixed count of
// significant digits, and JsonObject, a chainable object builder. Plain
// values; not thread-safe.
#ifndef PHALANX_BENCH_JSON_H_
#define PHALANX_BENCH_JSON_H_

#include <cstdint>
#include <string>

#include "nlohmann/json.hpp"

namespace phalanx::bench {

using Json = nlohmann::ordered_json;

// `value` rounded to `significant_digits` (as printf's %.Ng): null when not
// finite, an integer when the rounded value is integral (so 3600.0 prints
// "3600"), else the rounded double. Dumped, it reads as %.Ng does for
// magnitudes below 10^N (larger ones print without an exponent).
Json JsonNumber(double value, int significant_digits);

// Dumps `json` (indented by `indent` spaces, or on one line when negative);
// bytes that are not UTF-8 are replaced rather than throwing.
std::string DumpJson(const Json& json, int indent = -1);

// A JSON object whose members keep insertion order; doubles keep 6
// significant digits.
class JsonObject {
 public:
  JsonObject& Add(const std::string& key, double value);
  JsonObject& Add(const std::string& key, int64_t value);
  JsonObject& Add(const std::string& key, int value) {
    return Add(key, static_cast<int64_t>(value));
  }
  JsonObject& Add(const std::string& key, bool value);
  JsonObject& Add(const std::string& key, const std::string& value);
  JsonObject& Add(const std::string& key, const char* value) {
    return Add(key, std::string(value));
  }
  JsonObject& Add(const std::string& key, const JsonObject& value);
  // The object on one line.
  std::string Dump() const { return DumpJson(json_); }
  const Json& json() const { return json_; }

 private:
  Json json_ = Json::object();
};

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_JSON_H_
