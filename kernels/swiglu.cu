// Grid-stride loops over 8 elements per thread (16-byte Bf16x8 accesses where
// every pointer and row is 16-byte aligned), the tail and unaligned buffers one
// by one; the flat API is the one-row case of the row-strided kernels. The _rn
// intrinsics keep nvcc from contracting a multiply and an add into an fma, so
// each step rounds where the host reference's does.
#include "kernels/swiglu.h"

#include <string>

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

__device__ __forceinline__ void Load8(const __nv_bfloat16* p, float* out) {
  detail::Bf16x8ToFloat(detail::LoadBf16x8(p), out);
}

__device__ __forceinline__ void Store8(__nv_bfloat16* p, const float* in) {
  detail::StoreBf16x8(p, detail::FloatToBf16x8(in));
}

// Where element i of the [rows, width] walk sits in a buffer whose rows start
// in_stride apart. kStrided is false where the rows are contiguous (one row, or
// in_stride == width): then it is i, without a 64-bit division.
template <bool kStrided>
__device__ __forceinline__ int64_t RowAt(int64_t i, int64_t width, int64_t in_stride) {
  if constexpr (!kStrided) {
    return i;
  } else {
    const int64_t r = i / width;
    return r * in_stride + (i - r * width);
  }
}

// n = rows * width. On the vector path a strided walk has width % 8 == 0, so
// 8 elements never straddle a row and n has no tail.
template <bool kStrided>
__global__ void __launch_bounds__(kThreads)
    ForwardKernel(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                  int64_t n, int64_t width, int64_t in_stride, __nv_bfloat16* __restrict__ h,
                  bool vector) {
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  const int64_t first = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  int64_t done = 0;
  if (vector) {
    done = n / 8 * 8;
    for (int64_t v = first; v < n / 8; v += stride) {
      const int64_t in = RowAt<kStrided>(v * 8, width, in_stride);
      float av[8], bv[8], hv[8];
      Load8(a + in, av);
      Load8(b + in, bv);
#pragma unroll
      for (int i = 0; i < 8; ++i) hv[i] = SwiGluAt(av[i], bv[i]);
      Store8(h + v * 8, hv);
    }
  }
  for (int64_t i = done + first; i < n; i += stride) {
    const int64_t in = RowAt<kStrided>(i, width, in_stride);
    h[i] = __float2bfloat16_rn(SwiGluAt(__bfloat162float(a[in]), __bfloat162float(b[in])));
  }
}

template <bool kStrided>
__global__ void __launch_bounds__(kThreads)
    BackwardKernel(const __nv_bfloat16* __restrict__ grad_h, const __nv_bfloat16* __restrict__ a,
                   const __nv_bfloat16* __restrict__ b, int64_t n, int64_t width,
                   int64_t in_stride, __nv_bfloat16* __restrict__ grad_a,
                   __nv_bfloat16* __restrict__ grad_b, bool vector) {
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  const int64_t first = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  int64_t done = 0;
  if (vector) {
    done = n / 8 * 8;
    for (int64_t v = first; v < n / 8; v += stride) {
      const int64_t in = RowAt<kStrided>(v * 8, width, in_stride);
      float gv[8], av[8], bv[8], ga[8], gb[8];
      Load8(grad_h + v * 8, gv);
      Load8(a + in, av);
      Load8(b + in, bv);
#pragma unroll
      for (int i = 0; i < 8; ++i) SwiGluGradAt(gv[i], av[i], bv[i], ga[i], gb[i]);
      Store8(grad_a + in, ga);
      Store8(grad_b + in, gb);
    }
  }
  for (int64_t i = done + first; i < n; i += stride) {
    const int64_t in = RowAt<kStrided>(i, width, in_stride);
    float ga, gb;
    SwiGluGradAt(__bfloat162float(grad_h[i]), __bfloat162float(a[in]), __bfloat162float(b[in]),
                 ga, gb);
    grad_a[in] = __float2bfloat16_rn(ga);
    grad_b[in] = __float2bfloat16_rn(gb);
  }
}

// Contiguous rows walk the flat kernel; strided ones take 8 at a time only
// where every row starts 16-byte aligned too.
bool Strided(int64_t rows, int64_t width, int64_t in_stride) {
  return rows > 1 && in_stride != width;
}

bool RowsAligned(bool strided, int64_t width, int64_t in_stride) {
  return !strided || (width % 8 == 0 && in_stride % 8 == 0);
}

// Arguments checked by the callers; rows * width > 0.
void LaunchForward(const __nv_bfloat16* a, const __nv_bfloat16* b, int64_t rows, int64_t width,
                   int64_t in_stride, __nv_bfloat16* h, cudaStream_t stream) {
  const int64_t n = rows * width;
  const bool strided = Strided(rows, width, in_stride);
  const bool vector = IsAligned(a, 16) && IsAligned(b, 16) && IsAligned(h, 16) &&
                      RowsAligned(strided, width, in_stride);
  const int grid = detail::GridFor(n / 8 + 1, kThreads);
  if (strided) {
    ForwardKernel<true><<<grid, kThreads, 0, stream>>>(a, b, n, width, in_stride, h, vector);
  } else {
    ForwardKernel<false><<<grid, kThreads, 0, stream>>>(a, b, n, width, in_stride, h, vector);
  }
  TRELLIS_CHECK_LAUNCH();
}

void LaunchBackward(const __nv_bfloat16* grad_h, const __nv_bfloat16* a, const __nv_bfloat16* b,
                    int64_t rows, int64_t width, int64_t in_stride, __nv_bfloat16* grad_a,
                    __nv_bfloat16* grad_b, cudaStream_t stream) {
  const int64_t n = rows * width;
  const bool strided = Strided(rows, width, in_stride);
  const bool vector = IsAligned(grad_h, 16) && IsAligned(a, 16) && IsAligned(b, 16) &&
                      IsAligned(grad_a, 16) && IsAligned(grad_b, 16) &&
                      RowsAligned(strided, width, in_stride);
  const int grid = detail::GridFor(n / 8 + 1, kThreads);
  if (strided) {
    BackwardKernel<true><<<grid, kThreads, 0, stream>>>(grad_h, a, b, n, width, in_stride,
                                                        grad_a, grad_b, vector);
  } else {
    BackwardKernel<false><<<grid, kThreads, 0, stream>>>(grad_h, a, b, n, width, in_stride,
                                                         grad_a, grad_b, vector);
  }
  TRELLIS_CHECK_LAUNCH();
}

// rows >= 0, width >= 0 and in_stride >= width, checked even with nothing to do.
void RequireRows(const char* name, int64_t rows, int64_t width, int64_t in_stride) {
  Require(rows >= 0 && width >= 0, std::string(name) + ": rows and width must be >= 0");
  Require(in_stride >= width, std::string(name) + ": in_stride must be >= width");
}

}  // namespace

void SwiGluForward(const __nv_bfloat16* a, const __nv_bfloat16* b, int64_t n, __nv_bfloat16* h,
                   cudaStream_t stream) {
  Require(n >= 0 && (n == 0 || (a && b && h)), "SwiGluForward: n >= 0 and buffers");
  if (n == 0) return;
  LaunchForward(a, b, 1, n, n, h, stream);
}

void SwiGluBackward(const __nv_bfloat16* grad_h, const __nv_bfloat16* a, const __nv_bfloat16* b,
                    int64_t n, __nv_bfloat16* grad_a, __nv_bfloat16* grad_b, cudaStream_t stream) {
  Require(n >= 0 && (n == 0 || (grad_h && a && b && grad_a && grad_b)),
          "SwiGluBackward: n >= 0 and buffers");
  if (n == 0) return;
  LaunchBackward(grad_h, a, b, 1, n, n, grad_a, grad_b, stream);
}

void SwiGluForwardRows(const __nv_bfloat16* a, const __nv_bfloat16* b, int64_t rows,
                       int64_t width, int64_t in_stride, __nv_bfloat16* h, cudaStream_t stream) {
  RequireRows("SwiGluForwardRows", rows, width, in_stride);
  if (rows == 0 || width == 0) return;
  Require(a && b && h, "SwiGluForwardRows: buffers must be non-null when rows * width > 0");
  LaunchForward(a, b, rows, width, in_stride, h, stream);
}

void SwiGluBackwardRows(const __nv_bfloat16* grad_h, const __nv_bfloat16* a,
                        const __nv_bfloat16* b, int64_t rows, int64_t width, int64_t in_stride,
                        __nv_bfloat16* grad_a, __nv_bfloat16* grad_b, cudaStream_t stream) {
  RequireRows("SwiGluBackwardRows", rows, width, in_stride);
  if (rows == 0 || width == 0) return;
  Require(grad_h && a && b && grad_a && grad_b,
          "SwiGluBackwardRows: buffers must be non-null when rows * width > 0");
  LaunchBackward(grad_h, a, b, rows, width, in_stride, grad_a, grad_b, stream);
}

}  // namespace trellis::kernels
