// bf16 <-> fp32 on the host, bit-exact with the CUDA conversions (round to
// nearest even; NaN stays NaN). Tests and references use these so that CPU
// and GPU see the same bf16 values.
#pragma once

#include <cstdint>
#include <cstring>

namespace trellis::kernels::ref {

inline float Bf16ToFloat(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// The value f takes after a round trip through bf16.
inline float RoundToBf16(float f) { return Bf16ToFloat(FloatToBf16(f)); }

}  // namespace trellis::kernels::ref
