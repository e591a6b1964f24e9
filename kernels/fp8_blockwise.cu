// Blockwise E4M3 quantize / dequantize. Memory bound.
// bf16 quantize (the hot path): each thread moves 16 values (two 16-byte
// loads), 8 threads share one 128-value block; amax runs on packed bf16x2
// (abs and max are exact in bf16) and is reduced with 3 shuffles; each thread
// keeps 2 blocks' loads (64 bytes) in flight, and at <= 32 registers 2048
// threads fit on an SM, so 128 KiB per SM are in flight. One 16-byte store
// of codes per thread.
// fp32 quantize: each thread moves 8 values with 16-byte loads, 16 threads
// (half a warp) share one block, kUnroll blocks' loads in flight.
#include "kernels/fp8_blockwise.h"

#include <cuda_fp8.h>

#include <type_traits>

#include "kernels/launch_util.cuh"
#include "kernels/ref/fp8_e4m3.h"

namespace trellis::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 8;
constexpr int kThreadsPerBlock128 = ref::kFp8BlockSize / kPerThread;  // 16
constexpr int kUnroll = 4;
constexpr float kE4M3Max = ref::kE4M3Max;

__device__ __forceinline__ void Load8(const float* x, int64_t i, int64_t n, float* v) {
  if (i + kPerThread <= n) {
    const float4 a = *reinterpret_cast<const float4*>(x + i);
    const float4 b = *reinterpret_cast<const float4*>(x + i + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) v[j] = i + j < n ? x[i + j] : 0.0f;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) QuantizeKernel(const T* __restrict__ x, int64_t n,
                                                           int64_t num_blocks128,
                                                           uint8_t* __restrict__ q,
                                                           float* __restrict__ scales) {
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int sub = threadIdx.x % kThreadsPerBlock128;
  const unsigned half_mask = 0xffffu << (threadIdx.x & 16);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads / kThreadsPerBlock128;
  for (int64_t first = tid / kThreadsPerBlock128; first < num_blocks128;
       first += kUnroll * stride) {
    float v[kUnroll][kPerThread];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t b = first + u * stride;
      if (b < num_blocks128) Load8(x, b * ref::kFp8BlockSize + sub * kPerThread, n, v[u]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t b = first + u * stride;
      if (b >= num_blocks128) break;  // uniform over the half warp
      float amax = 0.0f;
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) amax = fmaxf(amax, fabsf(v[u][j]));
#pragma unroll
      for (int off = kThreadsPerBlock128 / 2; off > 0; off /= 2) {
        amax = fmaxf(amax, __shfl_xor_sync(half_mask, amax, off));
      }
      // The same fp32 operations as ref::Fp8EncodeFactor / Fp8BlockScale.
      const float factor = amax > 0.0f ? __fmul_rn(kE4M3Max, __frcp_rn(amax)) : 1.0f;
      const int64_t i = b * ref::kFp8BlockSize + sub * kPerThread;
      uint32_t packed[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(
            make_float2(__fmul_rn(v[u][4 * h], factor), __fmul_rn(v[u][4 * h + 1], factor)),
            __NV_SATFINITE, __NV_E4M3);
        const __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(
            make_float2(__fmul_rn(v[u][4 * h + 2], factor), __fmul_rn(v[u][4 * h + 3], factor)),
            __NV_SATFINITE, __NV_E4M3);
        packed[h] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
      }
      if (i + kPerThread <= n) {
        *reinterpret_cast<uint2*>(q + i) = make_uint2(packed[0], packed[1]);
      } else {
        for (int j = 0; j < kPerThread && i + j < n; ++j) {
          q[i + j] = static_cast<uint8_t>(packed[j / 4] >> (8 * (j % 4)));
        }
      }
      if (sub == 0) scales[b] = amax > 0.0f ? __fmul_rn(amax, ref::kInvE4M3Max) : 1.0f;
    }
  }
}

// bf16 path: 16 values per thread, 8 threads per 128-value block.
constexpr int kBf16PerThread = 16;
constexpr int kBf16ThreadsPerBlock128 = ref::kFp8BlockSize / kBf16PerThread;  // 8
constexpr int kBf16Unroll = 2;
constexpr int kBf16Blocks128PerCta = kThreads / kBf16ThreadsPerBlock128 * kBf16Unroll;  // 64

// e4m3 codes of 4 values (as 2 bf16x2) times factor, packed little-endian.
__device__ __forceinline__ uint32_t EncodeBf16x4(uint32_t lo_bits, uint32_t hi_bits, float factor) {
  __nv_bfloat162 lo, hi;
  memcpy(&lo, &lo_bits, 4);
  memcpy(&hi, &hi_bits, 4);
  const float2 a = __bfloat1622float2(lo), b = __bfloat1622float2(hi);
  const __nv_fp8x2_storage_t q0 = __nv_cvt_float2_to_fp8x2(
      make_float2(__fmul_rn(a.x, factor), __fmul_rn(a.y, factor)), __NV_SATFINITE, __NV_E4M3);
  const __nv_fp8x2_storage_t q1 = __nv_cvt_float2_to_fp8x2(
      make_float2(__fmul_rn(b.x, factor), __fmul_rn(b.y, factor)), __NV_SATFINITE, __NV_E4M3);
  return static_cast<uint32_t>(q0) | (static_cast<uint32_t>(q1) << 16);
}

__device__ __forceinline__ __nv_bfloat162 AbsMax(__nv_bfloat162 m, uint32_t bits) {
  __nv_bfloat162 v;
  memcpy(&v, &bits, 4);
  return __hmax2(m, __habs2(v));
}

// 8 bf16 from i on, zeros past n.
__device__ __noinline__ uint4 TailLoad(const __nv_bfloat16* x, int64_t i, int64_t n) {
  const auto* bits = reinterpret_cast<const uint16_t*>(x);
  uint32_t w[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t lo = i + 2 * j < n ? bits[i + 2 * j] : 0u;
    const uint32_t hi = i + 2 * j + 1 < n ? bits[i + 2 * j + 1] : 0u;
    w[j] = lo | (hi << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Codes for 16-byte aligned q go out in one 16-byte store, else in two 8-byte ones.
template <bool kQ16>
__global__ void __launch_bounds__(kThreads, 8)
    QuantizeBf16Kernel(const __nv_bfloat16* __restrict__ x, int64_t n, int64_t num_blocks128,
                       uint8_t* __restrict__ q, float* __restrict__ scales) {
  const int sub = threadIdx.x % kBf16ThreadsPerBlock128;
  const unsigned group_mask = 0xffu << (threadIdx.x & 24);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kBf16Blocks128PerCta +
                        threadIdx.x / kBf16ThreadsPerBlock128;
  constexpr int kStride = kThreads / kBf16ThreadsPerBlock128;  // 32 blocks of 128
  uint4 v[kBf16Unroll][2];
#pragma unroll
  for (int u = 0; u < kBf16Unroll; ++u) {
    const int64_t b = first + u * kStride;
    const int64_t i = b * ref::kFp8BlockSize + sub * kBf16PerThread;
    if (b >= num_blocks128) continue;
    if (i + kBf16PerThread <= n) {
      v[u][0] = __ldg(reinterpret_cast<const uint4*>(x + i));
      v[u][1] = __ldg(reinterpret_cast<const uint4*>(x + i + 8));
    } else {  // the tail of a partial last block: zeros leave amax unchanged
      v[u][0] = TailLoad(x, i, n);
      v[u][1] = TailLoad(x, i + 8, n);
    }
  }
#pragma unroll
  for (int u = 0; u < kBf16Unroll; ++u) {
    const int64_t b = first + u * kStride;
    if (b >= num_blocks128) break;  // uniform over the 8 threads of the block
    const uint32_t w[8] = {v[u][0].x, v[u][0].y, v[u][0].z, v[u][0].w,
                           v[u][1].x, v[u][1].y, v[u][1].z, v[u][1].w};
    __nv_bfloat162 m = __float2bfloat162_rn(0.0f);
#pragma unroll
    for (int j = 0; j < 8; ++j) m = AbsMax(m, w[j]);
#pragma unroll
    for (int off = kBf16ThreadsPerBlock128 / 2; off > 0; off /= 2) {
      uint32_t bits;
      memcpy(&bits, &m, 4);
      m = AbsMax(m, __shfl_xor_sync(group_mask, bits, off));  // both halves are >= 0
    }
    // bf16 -> fp32 is exact, so this is the reference's fp32 amax.
    const float amax = fmaxf(__low2float(m), __high2float(m));
    // The same fp32 operations as ref::Fp8EncodeFactor / Fp8BlockScale.
    const float factor = amax > 0.0f ? __fmul_rn(kE4M3Max, __frcp_rn(amax)) : 1.0f;
    uint4 codes;
    codes.x = EncodeBf16x4(w[0], w[1], factor);
    codes.y = EncodeBf16x4(w[2], w[3], factor);
    codes.z = EncodeBf16x4(w[4], w[5], factor);
    codes.w = EncodeBf16x4(w[6], w[7], factor);
    const int64_t i = b * ref::kFp8BlockSize + sub * kBf16PerThread;
    if (i + kBf16PerThread <= n) {
      if (kQ16) {
        *reinterpret_cast<uint4*>(q + i) = codes;
      } else {
        *reinterpret_cast<uint2*>(q + i) = make_uint2(codes.x, codes.y);
        *reinterpret_cast<uint2*>(q + i + 8) = make_uint2(codes.z, codes.w);
      }
    } else {
#pragma unroll
      for (int j = 0; j < kBf16PerThread; ++j) {
        const uint32_t word = j < 4 ? codes.x : j < 8 ? codes.y : j < 12 ? codes.z : codes.w;
        if (i + j < n) q[i + j] = static_cast<uint8_t>(word >> (8 * (j % 4)));
      }
    }
    if (sub == 0) scales[b] = amax > 0.0f ? __fmul_rn(amax, ref::kInvE4M3Max) : 1.0f;
  }
}

__device__ __forceinline__ void Store8(float* out, int64_t i, int64_t n, const float* v) {
  if (i + kPerThread <= n) {
    *reinterpret_cast<float4*>(out + i) = make_float4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<float4*>(out + i + 4) = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    for (int j = 0; j < kPerThread && i + j < n; ++j) out[i + j] = v[j];
  }
}

__device__ __forceinline__ void Store8(__nv_bfloat16* out, int64_t i, int64_t n, const float* v) {
  if (i + kPerThread <= n) {
    detail::StoreBf16x8(out + i, detail::FloatToBf16x8(v));
  } else {
    for (int j = 0; j < kPerThread && i + j < n; ++j) out[i + j] = __float2bfloat16_rn(v[j]);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) DequantizeKernel(const uint8_t* __restrict__ q,
                                                             const float* __restrict__ scales,
                                                             int64_t n, T* __restrict__ out) {
  const int64_t chunks = (n + kPerThread - 1) / kPerThread;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; c < chunks;
       c += stride) {
    const int64_t i = c * kPerThread;
    uint8_t bytes[kPerThread];
    if (i + kPerThread <= n) {
      *reinterpret_cast<uint2*>(bytes) = *reinterpret_cast<const uint2*>(q + i);
    } else {
      for (int j = 0; j < kPerThread; ++j) bytes[j] = i + j < n ? q[i + j] : 0;
    }
    const float scale = scales[i / ref::kFp8BlockSize];
    float v[kPerThread];
#pragma unroll
    for (int j = 0; j < kPerThread; j += 2) {
      const __nv_fp8x2_storage_t pair =
          static_cast<__nv_fp8x2_storage_t>(bytes[j] | (bytes[j + 1] << 8));
      const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
      v[j] = __fmul_rn(f.x, scale);
      v[j + 1] = __fmul_rn(f.y, scale);
    }
    Store8(out, i, n, v);
  }
}

template <typename T>
void Quantize(const T* x, int64_t n, uint8_t* q, float* scales, cudaStream_t stream) {
  Require(n >= 0, "QuantizeFp8Blockwise: n must be >= 0");
  Require(IsAligned(x, 16) && IsAligned(q, 8) && IsAligned(scales, 4),
          "QuantizeFp8Blockwise: x must be 16-byte aligned and q 8-byte aligned");
  if (n == 0) return;
  const int64_t blocks128 = ref::Fp8NumBlocks(n);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const int64_t grid = (blocks128 + kBf16Blocks128PerCta - 1) / kBf16Blocks128PerCta;
    Require(grid < (int64_t{1} << 31), "QuantizeFp8Blockwise: n too large");
    if (IsAligned(q, 16)) {
      QuantizeBf16Kernel<true><<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(x, n, blocks128, q, scales);
    } else {
      QuantizeBf16Kernel<false><<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(x, n, blocks128, q, scales);
    }
  } else {
    const int grid = detail::GridFor(blocks128 * kThreadsPerBlock128, kThreads * kUnroll, 4);
    QuantizeKernel<T><<<grid, kThreads, 0, stream>>>(x, n, blocks128, q, scales);
  }
  TRELLIS_CHECK_LAUNCH();
}

template <typename T>
void Dequantize(const uint8_t* q, const float* scales, int64_t n, T* out, cudaStream_t stream) {
  Require(n >= 0, "DequantizeFp8Blockwise: n must be >= 0");
  Require(IsAligned(out, 16) && IsAligned(q, 8) && IsAligned(scales, 4),
          "DequantizeFp8Blockwise: out must be 16-byte aligned and q 8-byte aligned");
  if (n == 0) return;
  const int grid = detail::GridFor((n + kPerThread - 1) / kPerThread, kThreads);
  DequantizeKernel<T><<<grid, kThreads, 0, stream>>>(q, scales, n, out);
  TRELLIS_CHECK_LAUNCH();
}

}  // namespace

void QuantizeFp8Blockwise(const float* x, int64_t n, uint8_t* q, float* scales,
                          cudaStream_t stream) {
  Quantize(x, n, q, scales, stream);
}
void QuantizeFp8Blockwise(const __nv_bfloat16* x, int64_t n, uint8_t* q, float* scales,
                          cudaStream_t stream) {
  Quantize(x, n, q, scales, stream);
}
void DequantizeFp8Blockwise(const uint8_t* q, const float* scales, int64_t n, float* out,
                            cudaStream_t stream) {
  Dequantize(q, scales, n, out, stream);
}
void DequantizeFp8Blockwise(const uint8_t* q, const float* scales, int64_t n,
                            __nv_bfloat16* out, cudaStream_t stream) {
  Dequantize(q, scales, n, out, stream);
}

}  // namespace trellis::kernels
