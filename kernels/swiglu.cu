// Grid-stride loops over 8 elements per thread (16-byte Bf16x8 accesses where
// every pointer is 16-byte aligned), the tail and unaligned buffers one by
// one. The _rn intrinsics keep nvcc from contracting a multiply and an add
// into an fma, so each step rounds where the host reference's does.
#include "kernels/swiglu.h"

#include "kernels/launch_util.cuh"

namespace trellis::kernels {
namespace {

constexpr int kThreads = 256;

// expf, not __expf: the fast one is off by far more than an ulp for large |a|.
__device__ __forceinline__ float Sigmoid(float a) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-a)));
}

__device__ __forceinline__ float SwiGluAt(float a, float b) {
  return __fmul_rn(__fmul_rn(a, Sigmoid(a)), b);
}

__device__ __forceinline__ void SwiGluGradAt(float g, float a, float b, float& grad_a,
                                             float& grad_b) {
  const float s = Sigmoid(a);
  grad_b = __fmul_rn(g, __fmul_rn(a, s));
  const float dsilu = __fmul_rn(s, __fadd_rn(1.0f, __fmul_rn(a, __fsub_rn(1.0f, s))));
  grad_a = __fmul_rn(__fmul_rn(g, b), dsilu);
}

__device__ __forceinline__ void Load8(const __nv_bfloat16* p, int64_t v, float* out) {
  detail::Bf16x8ToFloat(detail::LoadBf16x8(p + v * 8), out);
}

__device__ __forceinline__ void Store8(__nv_bfloat16* p, int64_t v, const float* in) {
  detail::StoreBf16x8(p + v * 8, detail::FloatToBf16x8(in));
}

__global__ void __launch_bounds__(kThreads)
    ForwardKernel(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                  int64_t n, __nv_bfloat16* __restrict__ h, bool vector) {
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  const int64_t first = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  int64_t done = 0;
  if (vector) {
    done = n / 8 * 8;
    for (int64_t v = first; v < n / 8; v += stride) {
      float av[8], bv[8], hv[8];
      Load8(a, v, av);
      Load8(b, v, bv);
#pragma unroll
      for (int i = 0; i < 8; ++i) hv[i] = SwiGluAt(av[i], bv[i]);
      Store8(h, v, hv);
    }
  }
  for (int64_t i = done + first; i < n; i += stride) {
    h[i] = __float2bfloat16_rn(SwiGluAt(__bfloat162float(a[i]), __bfloat162float(b[i])));
  }
}

__global__ void __launch_bounds__(kThreads)
    BackwardKernel(const __nv_bfloat16* __restrict__ grad_h, const __nv_bfloat16* __restrict__ a,
                   const __nv_bfloat16* __restrict__ b, int64_t n,
                   __nv_bfloat16* __restrict__ grad_a, __nv_bfloat16* __restrict__ grad_b,
                   bool vector) {
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  const int64_t first = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  int64_t done = 0;
  if (vector) {
    done = n / 8 * 8;
    for (int64_t v = first; v < n / 8; v += stride) {
      float gv[8], av[8], bv[8], ga[8], gb[8];
      Load8(grad_h, v, gv);
      Load8(a, v, av);
      Load8(b, v, bv);
#pragma unroll
      for (int i = 0; i < 8; ++i) SwiGluGradAt(gv[i], av[i], bv[i], ga[i], gb[i]);
      Store8(grad_a, v, ga);
      Store8(grad_b, v, gb);
    }
  }
  for (int64_t i = done + first; i < n; i += stride) {
    float ga, gb;
    SwiGluGradAt(__bfloat162float(grad_h[i]), __bfloat162float(a[i]), __bfloat162float(b[i]), ga,
                 gb);
    grad_a[i] = __float2bfloat16_rn(ga);
    grad_b[i] = __float2bfloat16_rn(gb);
  }
}

}  // namespace

void SwiGluForward(const __nv_bfloat16* a, const __nv_bfloat16* b, int64_t n, __nv_bfloat16* h,
                   cudaStream_t stream) {
  Require(n >= 0 && (n == 0 || (a && b && h)), "SwiGluForward: n >= 0 and buffers");
  if (n == 0) return;
  const bool vector = IsAligned(a, 16) && IsAligned(b, 16) && IsAligned(h, 16);
  ForwardKernel<<<detail::GridFor(n / 8 + 1, kThreads), kThreads, 0, stream>>>(a, b, n, h, vector);
  TRELLIS_CHECK_LAUNCH();
}

void SwiGluBackward(const __nv_bfloat16* grad_h, const __nv_bfloat16* a, const __nv_bfloat16* b,
                    int64_t n, __nv_bfloat16* grad_a, __nv_bfloat16* grad_b, cudaStream_t stream) {
  Require(n >= 0 && (n == 0 || (grad_h && a && b && grad_a && grad_b)),
          "SwiGluBackward: n >= 0 and buffers");
  if (n == 0) return;
  const bool vector = IsAligned(grad_h, 16) && IsAligned(a, 16) && IsAligned(b, 16) &&
                      IsAligned(grad_a, 16) && IsAligned(grad_b, 16);
  BackwardKernel<<<detail::GridFor(n / 8 + 1, kThreads), kThreads, 0, stream>>>(
      grad_h, a, b, n, grad_a, grad_b, vector);
  TRELLIS_CHECK_LAUNCH();
}

}  // namespace trellis::kernels
