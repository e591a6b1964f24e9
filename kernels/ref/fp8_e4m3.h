// FP8 E4M3 (the "fn" variant: no infinities, 0x7f/0xff are NaN, max 448) and
// the blockwise format used for expert weights: blocks of 128 consecutive
// values, one fp32 scale per block, q = e4m3(x * (448 * (1 / amax))),
// scale = amax * (1 / 448), x ~= decode(q) * scale. A block of zeros has scale 1.
#pragma once

#include <cstdint>

namespace trellis::kernels::ref {

inline constexpr int kFp8BlockSize = 128;
inline constexpr float kE4M3Max = 448.0f;

// Round to nearest even, saturating finite values to +-448; NaN -> 0x7f.
uint8_t EncodeE4M3(float x);
float DecodeE4M3(uint8_t q);

inline int64_t Fp8NumBlocks(int64_t n) { return (n + kFp8BlockSize - 1) / kFp8BlockSize; }

// The factor values are multiplied by before encoding, and the stored scale.
// Both the GPU kernel and this reference compute them with these exact fp32
// operations (a correctly rounded reciprocal, then products; no division, which
// costs the memory-bound GPU kernel issue slots), so encodings match bit for bit.
inline constexpr float kInvE4M3Max = 1.0f / kE4M3Max;
inline float Fp8EncodeFactor(float amax) { return amax > 0.0f ? kE4M3Max * (1.0f / amax) : 1.0f; }
inline float Fp8BlockScale(float amax) { return amax > 0.0f ? amax * kInvE4M3Max : 1.0f; }

// x[n] -> q[n], scales[Fp8NumBlocks(n)]. The last block may be partial.
void QuantizeFp8BlockwiseRef(const float* x, int64_t n, uint8_t* q, float* scales);
void DequantizeFp8BlockwiseRef(const uint8_t* q, const float* scales, int64_t n, float* out);

}  // namespace trellis::kernels::ref
