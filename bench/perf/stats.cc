#include "bench/perf/stats.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace phalanx::perf {

double Percentile(std::vector<double>& samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * (samples.size() - 1);
  const size_t low = static_cast<size_t>(std::floor(rank));
  const size_t high = std::min(low + 1, samples.size() - 1);
  const double fraction = rank - low;
  return samples[low] + (samples[high] - samples[low]) * fraction;
}

std::string JsonQuote(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

JsonObject& JsonObject::Add(const std::string& key, double value) {
  members_.emplace_back(key, std::isfinite(value)
                                 ? absl::StrFormat("%.6g", value)
                                 : std::string("null"));
  return *this;
}

JsonObject& JsonObject::Add(const std::string& key, int64_t value) {
  members_.emplace_back(key, absl::StrCat(value));
  return *this;
}

JsonObject& JsonObject::Add(const std::string& key, bool value) {
  members_.emplace_back(key, value ? "true" : "false");
  return *this;
}

JsonObject& JsonObject::Add(const std::string& key, const std::string& value) {
  members_.emplace_back(key, JsonQuote(value));
  return *this;
}

JsonObject& JsonObject::Add(const std::string& key, const JsonObject& value) {
  members_.emplace_back(key, value.Dump());
  return *this;
}

std::string JsonObject::Dump() const {
  std::string out = "{";
  for (size_t i = 0; i < members_.size(); ++i) {
    if (i > 0) out += ", ";
    absl::StrAppend(&out, JsonQuote(members_[i].first), ": ",
                    members_[i].second);
  }
  return out + "}";
}

}  // namespace phalanx::perf
