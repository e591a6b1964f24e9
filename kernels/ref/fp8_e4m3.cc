#include "kernels/ref/fp8_e4m3.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace trellis::kernels::ref {

uint8_t EncodeE4M3(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  float a = std::fabs(x);
  if (a >= kE4M3Max) return sign | 0x7e;  // saturate (448 = 0x7e)
  // Subnormals are multiples of 2^-9 below 2^-6; normals have 3 mantissa bits.
  int exp;
  std::frexp(a, &exp);  // a = f * 2^exp, f in [0.5, 1)
  int e = std::max(exp - 1, -6);  // unbiased exponent of the result grid
  float quantum = std::ldexp(1.0f, e - 3);
  float m = std::nearbyint(a / quantum);  // default rounding: to nearest even
  float r = m * quantum;
  if (r >= kE4M3Max) return sign | 0x7e;
  if (r == 0.0f) return sign;
  // Re-derive fields from the rounded value (rounding may carry into the exponent).
  std::frexp(r, &exp);
  e = exp - 1;
  if (e < -6) {  // subnormal: value = mant * 2^-9
    return sign | static_cast<uint8_t>(std::lround(r / std::ldexp(1.0f, -9)));
  }
  int mant = static_cast<int>(std::lround(r / std::ldexp(1.0f, e - 3))) - 8;
  return sign | static_cast<uint8_t>(((e + 7) << 3) | mant);
}

float DecodeE4M3(uint8_t q) {
  const float sign = (q & 0x80) ? -1.0f : 1.0f;
  const int e = (q >> 3) & 0xf;
  const int m = q & 0x7;
  if (e == 0xf && m == 0x7) return std::nanf("");
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -9);
  return sign * std::ldexp(1.0f + m / 8.0f, e - 7);
}

void QuantizeFp8BlockwiseRef(const float* x, int64_t n, uint8_t* q, float* scales) {
  for (int64_t b = 0; b < Fp8NumBlocks(n); ++b) {
    const int64_t begin = b * kFp8BlockSize, end = std::min(n, begin + kFp8BlockSize);
    float amax = 0.0f;
    for (int64_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float factor = Fp8EncodeFactor(amax);
    for (int64_t i = begin; i < end; ++i) q[i] = EncodeE4M3(x[i] * factor);
    scales[b] = Fp8BlockScale(amax);
  }
}

void DequantizeFp8BlockwiseRef(const uint8_t* q, const float* scales, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = DecodeE4M3(q[i]) * scales[i / kFp8BlockSize];
}

}  // namespace trellis::kernels::ref
