// Grid-stride loops over 4 elements per thread (float4 loads where every
// pointer is 16-byte aligned), the tail and unaligned buffers one by one. The
// contiguous copy is the one-row case of the strided one.
#include "kernels/muon_update.h"

#include <type_traits>

#include "kernels/launch_util.cuh"

namespace trellis::kernels {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ void Store(float* p, float v) { *p = v; }
__device__ __forceinline__ void Store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

template <typename Out>
__device__ __forceinline__ void MomentumAt(const float* grad, float* mom, Out* update, int64_t i,
                                           float momentum, float scale) {
  const float g = __fmul_rn(grad[i], scale);
  const float m = __fmaf_rn(momentum, mom[i], g);
  mom[i] = m;
  Store(update + i, __fmaf_rn(momentum, m, g));
}

template <typename Out>
__global__ void __launch_bounds__(kThreads)
    MomentumKernel(const float* __restrict__ grad, float* __restrict__ mom,
                   Out* __restrict__ update, int64_t n, float momentum,
                   const float* __restrict__ grad_scale, bool vector) {
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  const int64_t first = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  // x * 1 is x: no scale is a scale of one.
  const float scale = grad_scale != nullptr ? *grad_scale : 1.0f;
  int64_t done = 0;
  if (vector) {
    done = n / 4 * 4;
    for (int64_t v = first; v < n / 4; v += stride) {
      float4 g = reinterpret_cast<const float4*>(grad)[v];
      g.x = __fmul_rn(g.x, scale);
      g.y = __fmul_rn(g.y, scale);
      g.z = __fmul_rn(g.z, scale);
      g.w = __fmul_rn(g.w, scale);
      float4 m = reinterpret_cast<float4*>(mom)[v];
      m.x = __fmaf_rn(momentum, m.x, g.x);
      m.y = __fmaf_rn(momentum, m.y, g.y);
      m.z = __fmaf_rn(momentum, m.z, g.z);
      m.w = __fmaf_rn(momentum, m.w, g.w);
      reinterpret_cast<float4*>(mom)[v] = m;
      const float4 u = make_float4(__fmaf_rn(momentum, m.x, g.x), __fmaf_rn(momentum, m.y, g.y),
                                   __fmaf_rn(momentum, m.z, g.z), __fmaf_rn(momentum, m.w, g.w));
      if constexpr (std::is_same_v<Out, float>) {
        reinterpret_cast<float4*>(update)[v] = u;
      } else {
        __nv_bfloat162* c = reinterpret_cast<__nv_bfloat162*>(update + v * 4);
        c[0] = __floats2bfloat162_rn(u.x, u.y);
        c[1] = __floats2bfloat162_rn(u.z, u.w);
      }
    }
  }
  for (int64_t i = done + first; i < n; i += stride)
    MomentumAt(grad, mom, update, i, momentum, scale);
}

// Where element i of value goes in copy, whose rows of copy_row start
// copy_stride apart. kStrided is false where they are contiguous: then it is
// i, without a 64-bit division.
template <bool kStrided>
__device__ __forceinline__ int64_t CopyAt(int64_t i, int64_t copy_row, int64_t copy_stride) {
  if constexpr (!kStrided) {
    return i;
  } else {
    const int64_t r = i / copy_row;
    return r * copy_stride + (i - r * copy_row);
  }
}

__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

// Four consecutive ortho values from a 16-byte (fp32) or 8-byte (bf16) aligned address.
__device__ __forceinline__ float4 Load4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}
__device__ __forceinline__ float4 Load4(const __nv_bfloat16* p) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(p);
  const float2 lo = __bfloat1622float2(h[0]), hi = __bfloat1622float2(h[1]);
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// value = fma(step, ortho, value * decay), and its bf16 copy: one element.
template <bool kStrided, typename Ortho>
__device__ __forceinline__ void ApplyAt(float* value, Ortho ortho, int64_t i, float decay,
                                        float step, __nv_bfloat16* copy, int64_t copy_row,
                                        int64_t copy_stride) {
  const float w = __fmaf_rn(step, ToFloat(ortho), __fmul_rn(value[i], decay));
  value[i] = w;
  if (copy != nullptr) copy[CopyAt<kStrided>(i, copy_row, copy_stride)] = __float2bfloat16_rn(w);
}

// On the vector path a strided copy has copy_row % 4 == 0: 4 elements never
// straddle a row, and each 4 start 8-byte aligned.
template <bool kStrided, typename Ortho>
__global__ void __launch_bounds__(kThreads)
    ApplyKernel(float* __restrict__ value, const Ortho* __restrict__ ortho, int64_t n, float decay,
                float step, __nv_bfloat16* __restrict__ copy, int64_t copy_row,
                int64_t copy_stride, bool vector) {
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  const int64_t first = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  int64_t done = 0;
  if (vector) {
    done = n / 4 * 4;
    for (int64_t v = first; v < n / 4; v += stride) {
      const float4 o = Load4(ortho + v * 4);
      float4 w = reinterpret_cast<float4*>(value)[v];
      w.x = __fmaf_rn(step, o.x, __fmul_rn(w.x, decay));
      w.y = __fmaf_rn(step, o.y, __fmul_rn(w.y, decay));
      w.z = __fmaf_rn(step, o.z, __fmul_rn(w.z, decay));
      w.w = __fmaf_rn(step, o.w, __fmul_rn(w.w, decay));
      reinterpret_cast<float4*>(value)[v] = w;
      if (copy != nullptr) {
        __nv_bfloat162* c = reinterpret_cast<__nv_bfloat162*>(
            copy + CopyAt<kStrided>(v * 4, copy_row, copy_stride));
        c[0] = __floats2bfloat162_rn(w.x, w.y);
        c[1] = __floats2bfloat162_rn(w.z, w.w);
      }
    }
  }
  for (int64_t i = done + first; i < n; i += stride)
    ApplyAt<kStrided>(value, ortho[i], i, decay, step, copy, copy_row, copy_stride);
}

// The apply with ortho stored transposed: matrix blockIdx.y of value is
// [rows, cols], of ortho [cols, rows]. A 32 x 32 tile of ortho is read along
// its rows into shared memory, then value and copy along theirs.
template <bool kStrided>
__global__ void ApplyTransposedKernel(float* __restrict__ value,
                                      const __nv_bfloat16* __restrict__ ortho, int64_t rows,
                                      int64_t cols, float decay, float step,
                                      __nv_bfloat16* __restrict__ copy, int64_t copy_row,
                                      int64_t copy_stride) {
  __shared__ float tile[32][33];
  const int64_t elems = rows * cols, base = blockIdx.y * elems;
  const int64_t tiles_c = (cols + 31) / 32;
  const int64_t r0 = (blockIdx.x / tiles_c) * 32, c0 = (blockIdx.x % tiles_c) * 32;
  const __nv_bfloat16* ob = ortho + base;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;  // ortho row c, column r
    if (r < rows && c < cols) tile[threadIdx.x][i] = __bfloat162float(ob[c * rows + r]);
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols)
      ApplyAt<kStrided>(value, tile[i][threadIdx.x], base + r * cols + c, decay, step, copy,
                        copy_row, copy_stride);
  }
}

// ApplyTransposedKernel with 16-byte accesses: 64 x 64 tiles, 256 threads.
// Needs rows % 8 == 0 (ortho rows read 8 bf16 at a time), cols % 4 == 0
// (value read and written 4 floats at a time, the copy 4 bf16), value 16-byte
// and ortho 16-byte aligned, the copy 8-byte aligned with its rows and stride
// multiples of 4.
constexpr int kTile = 64;

template <bool kStrided>
__global__ void __launch_bounds__(256)
    ApplyTransposedVectorKernel(float* __restrict__ value, const __nv_bfloat16* __restrict__ ortho,
                                int64_t rows, int64_t cols, float decay, float step,
                                __nv_bfloat16* __restrict__ copy, int64_t copy_row,
                                int64_t copy_stride) {
  __shared__ float tile[kTile][kTile + 1];  // [r - r0][c - c0]
  const int64_t elems = rows * cols, base = blockIdx.y * elems;
  const int64_t tiles_c = (cols + kTile - 1) / kTile;
  const int64_t r0 = (blockIdx.x / tiles_c) * kTile, c0 = (blockIdx.x % tiles_c) * kTile;
  const __nv_bfloat16* ob = ortho + base;
  // ortho's rows c0..c0+63, 8 chunks of 8 values each: 512 chunks, 2 a thread.
  for (int k = threadIdx.x; k < kTile * 8; k += blockDim.x) {
    const int dc = k / 8, dr = (k % 8) * 8;
    const int64_t c = c0 + dc, r = r0 + dr;
    if (c >= cols || r >= rows) continue;
    float v[8];
    detail::Bf16x8ToFloat(detail::LoadBf16x8(ob + c * rows + r), v);
#pragma unroll
    for (int j = 0; j < 8; ++j) tile[dr + j][dc] = v[j];
  }
  __syncthreads();
  // value's rows r0..r0+63, 16 groups of 4 columns each: 1024 groups, 4 a thread.
  for (int k = threadIdx.x; k < kTile * 16; k += blockDim.x) {
    const int dr = k / 16, dc = (k % 16) * 4;
    const int64_t r = r0 + dr, c = c0 + dc;
    if (r >= rows || c >= cols) continue;
    const int64_t i = base + r * cols + c;
    float4 w = *reinterpret_cast<float4*>(value + i);
    w.x = __fmaf_rn(step, tile[dr][dc], __fmul_rn(w.x, decay));
    w.y = __fmaf_rn(step, tile[dr][dc + 1], __fmul_rn(w.y, decay));
    w.z = __fmaf_rn(step, tile[dr][dc + 2], __fmul_rn(w.z, decay));
    w.w = __fmaf_rn(step, tile[dr][dc + 3], __fmul_rn(w.w, decay));
    *reinterpret_cast<float4*>(value + i) = w;
    if (copy != nullptr) {
      __nv_bfloat162* out =
          reinterpret_cast<__nv_bfloat162*>(copy + CopyAt<kStrided>(i, copy_row, copy_stride));
      out[0] = __floats2bfloat162_rn(w.x, w.y);
      out[1] = __floats2bfloat162_rn(w.z, w.w);
    }
  }
}

template <typename Out>
void LaunchMomentum(const float* grad, float* mom, Out* update, int64_t n, float momentum,
                    const float* grad_scale, cudaStream_t stream) {
  Require(n >= 0 && (n == 0 || (grad && mom && update)), "MuonMomentum: n >= 0 and buffers");
  if (n == 0) return;
  // bf16 updates are stored 4 at a time (8 bytes), fp32 ones as a float4.
  const bool vector = IsAligned(grad, 16) && IsAligned(mom, 16) &&
                      IsAligned(update, std::is_same_v<Out, float> ? 16 : 8);
  MomentumKernel<<<detail::GridFor(n / 4 + 1, kThreads), kThreads, 0, stream>>>(
      grad, mom, update, n, momentum, grad_scale, vector);
  TRELLIS_CHECK_LAUNCH();
}

// The arguments every apply shares; false where there is nothing to do.
bool CheckApply(const float* value, const void* ortho, int64_t n, const __nv_bfloat16* copy,
                int64_t copy_row, int64_t copy_stride) {
  Require(n >= 0 && (n == 0 || (value && ortho)), "ApplyUpdate: n >= 0 and buffers");
  if (n == 0) return false;
  if (copy != nullptr) {
    Require(copy_row > 0, "ApplyUpdate: copy_row must be > 0 where copy is given");
    Require(copy_stride >= copy_row, "ApplyUpdate: copy_stride must be >= copy_row");
    Require(n % copy_row == 0, "ApplyUpdate: n must be a multiple of copy_row");
  }
  return true;
}

// One row, or rows back to back, is a contiguous copy.
bool IsStrided(int64_t n, const __nv_bfloat16* copy, int64_t copy_row, int64_t copy_stride) {
  return copy != nullptr && copy_row != copy_stride && n > copy_row;
}

// value and ortho in the same layout: 4 elements a thread where aligned.
template <typename Ortho>
void LaunchApply(float* value, const Ortho* ortho, int64_t n, float decay, float step,
                 __nv_bfloat16* copy, int64_t copy_row, int64_t copy_stride,
                 cudaStream_t stream) {
  const bool strided = IsStrided(n, copy, copy_row, copy_stride);
  // 4 ortho values are a float4 or 8 bytes of bf16; the bf16 copy is stored 4
  // at a time (8 bytes).
  const bool vector = IsAligned(value, 16) && IsAligned(ortho, 4 * sizeof(Ortho)) &&
                      (copy == nullptr || IsAligned(copy, 8)) &&
                      (!strided || (copy_row % 4 == 0 && copy_stride % 4 == 0));
  const int grid = detail::GridFor(n / 4 + 1, kThreads);
  if (strided) {
    ApplyKernel<true><<<grid, kThreads, 0, stream>>>(value, ortho, n, decay, step, copy,
                                                     copy_row, copy_stride, vector);
  } else {
    ApplyKernel<false><<<grid, kThreads, 0, stream>>>(value, ortho, n, decay, step, copy,
                                                      copy_row, copy_stride, vector);
  }
  TRELLIS_CHECK_LAUNCH();
}

}  // namespace

void MuonMomentum(const float* grad, float* mom, float* update, int64_t n, float momentum,
                  const float* grad_scale, cudaStream_t stream) {
  LaunchMomentum(grad, mom, update, n, momentum, grad_scale, stream);
}

void MuonMomentum(const float* grad, float* mom, __nv_bfloat16* update, int64_t n,
                  float momentum, const float* grad_scale, cudaStream_t stream) {
  LaunchMomentum(grad, mom, update, n, momentum, grad_scale, stream);
}

void ApplyUpdate(float* value, const float* ortho, int64_t n, float decay, float step,
                 __nv_bfloat16* copy, cudaStream_t stream) {
  ApplyUpdate(value, ortho, n, decay, step, copy, n, n, stream);
}

void ApplyUpdate(float* value, const float* ortho, int64_t n, float decay, float step,
                 __nv_bfloat16* copy, int64_t copy_row, int64_t copy_stride, cudaStream_t stream) {
  if (!CheckApply(value, ortho, n, copy, copy_row, copy_stride)) return;
  LaunchApply(value, ortho, n, decay, step, copy, copy_row, copy_stride, stream);
}

void ApplyUpdateBf16(float* value, const __nv_bfloat16* ortho, int64_t batch, int64_t rows,
                     int64_t cols, bool ortho_transposed, float decay, float step,
                     __nv_bfloat16* copy, int64_t copy_row, int64_t copy_stride,
                     cudaStream_t stream) {
  Require(batch >= 0 && rows >= 0 && cols >= 0,
          "ApplyUpdateBf16: batch, rows and cols must be >= 0");
  const int64_t n = batch * rows * cols;
  if (!CheckApply(value, ortho, n, copy, copy_row, copy_stride)) return;
  if (!ortho_transposed) {
    LaunchApply(value, ortho, n, decay, step, copy, copy_row, copy_stride, stream);
    return;
  }
  Require(batch <= 65535, "ApplyUpdateBf16: at most 65535 matrices when transposed");
  const bool strided = IsStrided(n, copy, copy_row, copy_stride);
  const bool vector = rows % 8 == 0 && cols % 4 == 0 && IsAligned(value, 16) &&
                      IsAligned(ortho, 16) && (copy == nullptr || IsAligned(copy, 8)) &&
                      (!strided || (copy_row % 4 == 0 && copy_stride % 4 == 0));
  if (vector) {
    const dim3 grid(static_cast<unsigned>(((rows + kTile - 1) / kTile) *
                                          ((cols + kTile - 1) / kTile)),
                    static_cast<unsigned>(batch));
    if (strided) {
      ApplyTransposedVectorKernel<true><<<grid, 256, 0, stream>>>(
          value, ortho, rows, cols, decay, step, copy, copy_row, copy_stride);
    } else {
      ApplyTransposedVectorKernel<false><<<grid, 256, 0, stream>>>(
          value, ortho, rows, cols, decay, step, copy, copy_row, copy_stride);
    }
    TRELLIS_CHECK_LAUNCH();
    return;
  }
  const dim3 grid(static_cast<unsigned>(((rows + 31) / 32) * ((cols + 31) / 32)),
                  static_cast<unsigned>(batch));
  const dim3 block(32, 8);
  if (strided) {
    ApplyTransposedKernel<true><<<grid, block, 0, stream>>>(value, ortho, rows, cols, decay, step,
                                                            copy, copy_row, copy_stride);
  } else {
    ApplyTransposedKernel<false><<<grid, block, 0, stream>>>(value, ortho, rows, cols, decay,
                                                             step, copy, copy_row, copy_stride);
  }
  TRELLIS_CHECK_LAUNCH();
}

}  // namespace trellis::kernels
