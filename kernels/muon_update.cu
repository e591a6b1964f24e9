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
                                           float momentum) {
  const float g = grad[i];
  const float m = __fmaf_rn(momentum, mom[i], g);
  mom[i] = m;
  Store(update + i, __fmaf_rn(momentum, m, g));
}

template <typename Out>
__global__ void __launch_bounds__(kThreads)
    MomentumKernel(const float* __restrict__ grad, float* __restrict__ mom,
                   Out* __restrict__ update, int64_t n, float momentum, bool vector) {
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  const int64_t first = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  int64_t done = 0;
  if (vector) {
    done = n / 4 * 4;
    for (int64_t v = first; v < n / 4; v += stride) {
      const float4 g = reinterpret_cast<const float4*>(grad)[v];
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
  for (int64_t i = done + first; i < n; i += stride) MomentumAt(grad, mom, update, i, momentum);
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

// On the vector path a strided copy has copy_row % 4 == 0: 4 elements never
// straddle a row, and each 4 start 8-byte aligned.
template <bool kStrided>
__global__ void __launch_bounds__(kThreads)
    ApplyKernel(float* __restrict__ value, const float* __restrict__ ortho, int64_t n, float decay,
                float step, __nv_bfloat16* __restrict__ copy, int64_t copy_row,
                int64_t copy_stride, bool vector) {
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  const int64_t first = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  int64_t done = 0;
  if (vector) {
    done = n / 4 * 4;
    for (int64_t v = first; v < n / 4; v += stride) {
      const float4 o = reinterpret_cast<const float4*>(ortho)[v];
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
  for (int64_t i = done + first; i < n; i += stride) {
    const float w = __fmaf_rn(step, ortho[i], __fmul_rn(value[i], decay));
    value[i] = w;
    if (copy != nullptr) copy[CopyAt<kStrided>(i, copy_row, copy_stride)] = __float2bfloat16_rn(w);
  }
}

template <typename Out>
void LaunchMomentum(const float* grad, float* mom, Out* update, int64_t n, float momentum,
                    cudaStream_t stream) {
  Require(n >= 0 && (n == 0 || (grad && mom && update)), "MuonMomentum: n >= 0 and buffers");
  if (n == 0) return;
  // bf16 updates are stored 4 at a time (8 bytes), fp32 ones as a float4.
  const bool vector = IsAligned(grad, 16) && IsAligned(mom, 16) &&
                      IsAligned(update, std::is_same_v<Out, float> ? 16 : 8);
  MomentumKernel<<<detail::GridFor(n / 4 + 1, kThreads), kThreads, 0, stream>>>(
      grad, mom, update, n, momentum, vector);
  TRELLIS_CHECK_LAUNCH();
}

}  // namespace

void MuonMomentum(const float* grad, float* mom, float* update, int64_t n, float momentum,
                  cudaStream_t stream) {
  LaunchMomentum(grad, mom, update, n, momentum, stream);
}

void MuonMomentum(const float* grad, float* mom, __nv_bfloat16* update, int64_t n,
                  float momentum, cudaStream_t stream) {
  LaunchMomentum(grad, mom, update, n, momentum, stream);
}

void ApplyUpdate(float* value, const float* ortho, int64_t n, float decay, float step,
                 __nv_bfloat16* copy, cudaStream_t stream) {
  ApplyUpdate(value, ortho, n, decay, step, copy, n, n, stream);
}

void ApplyUpdate(float* value, const float* ortho, int64_t n, float decay, float step,
                 __nv_bfloat16* copy, int64_t copy_row, int64_t copy_stride, cudaStream_t stream) {
  Require(n >= 0 && (n == 0 || (value && ortho)), "ApplyUpdate: n >= 0 and buffers");
  if (n == 0) return;
  if (copy != nullptr) {
    Require(copy_row > 0, "ApplyUpdate: copy_row must be > 0 where copy is given");
    Require(copy_stride >= copy_row, "ApplyUpdate: copy_stride must be >= copy_row");
    Require(n % copy_row == 0, "ApplyUpdate: n must be a multiple of copy_row");
  }
  // One row, or rows back to back, is a contiguous copy.
  const bool strided = copy != nullptr && copy_row != copy_stride && n > copy_row;
  // The bf16 copy is stored 4 at a time (8 bytes).
  const bool vector = IsAligned(value, 16) && IsAligned(ortho, 16) &&
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

}  // namespace trellis::kernels
