// Small device-side helpers shared by the .cu files (not part of the API).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda_check.h"

namespace trellis::kernels::detail {

// Enough blocks of `threads` to cover `work` items, capped at a few waves of
// the device (the kernels loop over the rest).
inline int GridFor(int64_t work, int threads, int waves_per_sm = 8) {
  int device = 0, sms = 0;
  TRELLIS_CUDA_CHECK(cudaGetDevice(&device));
  TRELLIS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t needed = (work + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(sms) * waves_per_sm;
  return static_cast<int>(needed < cap ? (needed > 0 ? needed : 1) : cap);
}

// 8 bf16 in one 16-byte word.
struct alignas(16) Bf16x8 {
  __nv_bfloat162 v[4];
};

// One 16-byte access each. A Bf16x8 read or assigned through a pointer is
// copied member by member (__nv_bfloat162's copies are user-defined): four
// 4-byte accesses. p must be 16-byte aligned.
__device__ __forceinline__ Bf16x8 LoadBf16x8(const __nv_bfloat16* p) {
  const uint4 bits = *reinterpret_cast<const uint4*>(p);
  Bf16x8 v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

__device__ __forceinline__ void StoreBf16x8(__nv_bfloat16* p, const Bf16x8& v) {
  uint4 bits;
  memcpy(&bits, &v, sizeof bits);
  *reinterpret_cast<uint4*>(p) = bits;
}

__device__ __forceinline__ void Bf16x8ToFloat(const Bf16x8& in, float* out) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(in.v[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ Bf16x8 FloatToBf16x8(const float* in) {
  Bf16x8 out;
#pragma unroll
  for (int i = 0; i < 4; ++i) out.v[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
  return out;
}

}  // namespace trellis::kernels::detail
