#include "trainer_core/model/init.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

namespace trellis::train {
namespace {

uint64_t Finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Phi(+-2): the truncation points in probability space.
const double kLow = 0.5 * std::erfc(2.0 / std::sqrt(2.0));
const double kHigh = 1.0 - kLow;

template <typename T>
void FillRange(uint64_t seed, int64_t first, int64_t count, double std, T* out) {
  for (int64_t i = 0; i < count; ++i)
    out[i] = static_cast<T>(TruncatedNormalAt(seed, static_cast<uint64_t>(first + i), std));
}

// Every element is a pure function of its index, so large fills split over
// the cores give the same values (a 2.5 B parameter model takes minutes on
// one core).
template <typename T>
void Fill(uint64_t seed, int64_t first, int64_t count, double std, T* out) {
  constexpr int64_t kPerThread = int64_t{1} << 20;
  const int64_t threads = std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()),
                                            (count + kPerThread - 1) / kPerThread);
  if (threads <= 1) return FillRange(seed, first, count, std, out);
  std::vector<std::thread> pool;
  const int64_t chunk = (count + threads - 1) / threads;
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t lo = t * chunk, n = std::min(count, lo + chunk) - lo;
    if (n > 0) pool.emplace_back(FillRange<T>, seed, first + lo, n, std, out + lo);
  }
  for (auto& th : pool) th.join();
}

}  // namespace

uint64_t ParamSeed(uint64_t run_seed, std::string_view param_name) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (char c : param_name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return Finalize(run_seed ^ Finalize(h));
}

uint64_t CounterHash(uint64_t seed, uint64_t index) {
  return Finalize(Finalize(seed + 0x9E3779B97F4A7C15ull * (index + 1)) ^ seed);
}

double CounterUniform(uint64_t seed, uint64_t index) {
  // 53 random bits, shifted by half a unit so neither 0 nor 1 can occur.
  return (static_cast<double>(CounterHash(seed, index) >> 11) + 0.5) * 0x1.0p-53;
}

double TruncatedNormalAt(uint64_t seed, uint64_t index, double std) {
  double p = kLow + CounterUniform(seed, index) * (kHigh - kLow);
  return std * NormalQuantile(p);
}

void FillTruncatedNormal(uint64_t seed, int64_t first, int64_t count, double std, float* out) {
  Fill(seed, first, count, std, out);
}
void FillTruncatedNormal(uint64_t seed, int64_t first, int64_t count, double std, double* out) {
  Fill(seed, first, count, std, out);
}

double NormalQuantile(double p) {
  // Acklam's rational approximation (relative error 1e-9), then one Halley
  // step against erfc, which brings it to double precision.
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  double x;
  if (p < 0.02425) {
    double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p > 1 - 0.02425) {
    double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

}  // namespace trellis::train
