// Small helpers of the performance tools: percentiles over samples and a
// JSON object writer (so bench/perf needs no JSON library). Plain values;
// not thread-safe.
#ifndef PHALANX_BENCH_PERF_STATS_H_
#define PHALANX_BENCH_PERF_STATS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace phalanx::perf {

// Returns the `p`-th percentile (0..100) of `samples` by linear interpolation
// between closest ranks; 0 for no samples. Sorts `samples`.
double Percentile(std::vector<double>& samples, double p);

// A JSON object whose members keep insertion order. Numbers that are not
// finite are written as null.
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
  // The object as text, members separated by ", ".
  std::string Dump() const;

 private:
  std::vector<std::pair<std::string, std::string>> members_;  // key, raw JSON
};

// `text` as a JSON string literal, quotes included.
std::string JsonQuote(const std::string& text);

}  // namespace phalanx::perf

#endif  // PHALANX_BENCH_PERF_STATS_H_
