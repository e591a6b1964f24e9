#pragma once
// Seeded random numbers with the transforms written out, so that a seed gives
// the same trace with any standard library (the engine is fully specified by
// the standard; the std distributions are not).

#include <cmath>
#include <cstdint>
#include <random>

namespace trellis::bench {

class Rng {
 public:
  // One independent stream per (seed, stream): rows share streams by name, so
  // that the i-th queue wait of every row is the same draw.
  Rng(uint64_t seed, uint64_t stream) : engine_(Mix(seed * 0x9E3779B97F4A7C15ULL + stream)) {}

  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Exponential(double mean) { return -mean * std::log1p(-Uniform()); }
  double Normal() {  // Box-Muller
    double u1 = 1.0 - Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  double LogNormal(double median, double sigma) { return median * std::exp(sigma * Normal()); }
  // 0 .. n-1
  uint64_t Below(uint64_t n) { return static_cast<uint64_t>(Uniform() * static_cast<double>(n)); }

 private:
  static uint64_t Mix(uint64_t z) {  // splitmix64's finaliser
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  std::mt19937_64 engine_;
};

}  // namespace trellis::bench
