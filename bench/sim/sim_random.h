// SimRandom: a seeded random source whose output is the same on every
// standard library (std::mt19937_64 is fully specified; std::
// distributions are not, so draws are made here). Not thread-safe.
#ifndef PHALANX_BENCH_SIM_SIM_RANDOM_H_
#define PHALANX_BENCH_SIM_SIM_RANDOM_H_

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <utility>
#include <vector>

namespace phalanx::bench {

class SimRandom {
 public:
  explicit SimRandom(uint64_t seed) : engine_(seed) {}

  // Uniform in [0, 1), 53 random bits.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform in [low, high).
  double Uniform(double low, double high) {
    return low + (high - low) * Uniform();
  }
  // Standard normal (Box-Muller; one draw per call).
  double Normal() {
    const double u = 1.0 - Uniform();  // (0, 1]
    const double v = Uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
  }
  // Exponential with mean `mean`.
  double Exponential(double mean) { return -mean * std::log(1.0 - Uniform()); }
  // Index i drawn with probability weights[i] / sum(weights).
  template <typename T>
  size_t Pick(const std::vector<std::pair<T, double>>& weights) {
    double total = 0;
    for (const auto& [value, weight] : weights) total += weight;
    double x = Uniform() * total;
    for (size_t i = 0; i < weights.size(); ++i) {
      x -= weights[i].second;
      if (x < 0) return i;
    }
    return weights.size() - 1;
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_SIM_SIM_RANDOM_H_
