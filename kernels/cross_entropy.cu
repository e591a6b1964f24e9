// One block per row (a grid-stride loop over rows): a pass of online max and
// sum of exponentials, a block reduction, then a pass that writes the
// gradient. A 32,000-wide bf16 row is 64 KB, so the second pass reads what the
// first left in L2. expf and logf, not the fast forms: the loss is compared
// with the fp64 reference to fp32 precision.
#include "kernels/cross_entropy.h"

#include <cmath>
#include <string>

#include "kernels/launch_util.cuh"

namespace trellis::kernels {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kIgnored = -1;

// A running (max, sum of exp(x - max)) pair; an empty one is (-inf, 0).
struct MaxSum {
  float m;
  float s;
};

__device__ __forceinline__ float ScaleTo(float m, float s, float to) {
  return m == -INFINITY ? 0.0f : s * expf(m - to);
}

__device__ __forceinline__ MaxSum Combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};
  return {m, ScaleTo(a.m, a.s, m) + ScaleTo(b.m, b.s, m)};
}

template <int kVec>
__device__ __forceinline__ void LoadVec(const __nv_bfloat16* p, float* out) {
  if constexpr (kVec == 8) {
    detail::Bf16x8ToFloat(detail::LoadBf16x8(p), out);
  } else {
    out[0] = __bfloat162float(*p);
  }
}

template <int kVec>
__device__ __forceinline__ void StoreVec(__nv_bfloat16* p, const float* in) {
  if constexpr (kVec == 8) {
    detail::StoreBf16x8(p, detail::FloatToBf16x8(in));
  } else {
    *p = __float2bfloat16_rn(in[0]);
  }
}

__device__ __forceinline__ MaxSum WarpCombine(MaxSum v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2)
    v = Combine(v, {__shfl_xor_sync(0xffffffffu, v.m, off),
                    __shfl_xor_sync(0xffffffffu, v.s, off)});
  return v;
}

// The block's (max, sum) from every thread's; every thread gets the result.
__device__ MaxSum BlockCombine(MaxSum v, MaxSum* shared) {
  v = WarpCombine(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  return WarpCombine(lane < kWarps ? shared[lane] : MaxSum{-INFINITY, 0.0f});
}

// kVec elements per access: 8 (16-byte aligned rows, vocab % 8 == 0) or 1.
template <int kVec>
__global__ void __launch_bounds__(kThreads)
    RowsKernel(const __nv_bfloat16* logits, int64_t rows, int64_t vocab, int64_t ld,
               const int64_t* __restrict__ targets, float* __restrict__ loss,
               __nv_bfloat16* grad) {
  __shared__ MaxSum partial[kWarps];
  __shared__ float target_logit;
  const int64_t vecs = vocab / kVec;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const __nv_bfloat16* x = logits + row * ld;
    const int64_t t = targets[row];
    const bool valid = t >= 0 && t < vocab;
    float lse = 0.0f;
    if (valid) {
      MaxSum acc{-INFINITY, 0.0f};
      for (int64_t v = threadIdx.x; v < vecs; v += kThreads) {
        float f[kVec];
        LoadVec<kVec>(x + v * kVec, f);
        float m = f[0];
#pragma unroll
        for (int i = 1; i < kVec; ++i) m = fmaxf(m, f[i]);
        m = fmaxf(m, acc.m);
        float s = ScaleTo(acc.m, acc.s, m);
        if (m != -INFINITY) {
#pragma unroll
          for (int i = 0; i < kVec; ++i) s += expf(f[i] - m);
        }
        acc = {m, s};
      }
      if (threadIdx.x == 0) target_logit = __bfloat162float(x[t]);
      const MaxSum all = BlockCombine(acc, partial);
      lse = all.m + logf(all.s);
      __syncthreads();  // target_logit is read below, before any write of the row
      if (threadIdx.x == 0) loss[row] = lse - target_logit;
    } else if (threadIdx.x == 0) {
      loss[row] = t == kIgnored ? 0.0f : NAN;
    }
    if (grad != nullptr) {
      __nv_bfloat16* g = grad + row * ld;
      for (int64_t v = threadIdx.x; v < vecs; v += kThreads) {
        float f[kVec];
        if (valid) {
          LoadVec<kVec>(x + v * kVec, f);
#pragma unroll
          for (int i = 0; i < kVec; ++i) f[i] = expf(f[i] - lse);
#pragma unroll
          for (int i = 0; i < kVec; ++i)
            if (v * kVec + i == t) f[i] -= 1.0f;
        } else {
#pragma unroll
          for (int i = 0; i < kVec; ++i) f[i] = 0.0f;
        }
        StoreVec<kVec>(g + v * kVec, f);
      }
    }
    __syncthreads();  // partial and target_logit are reused by the next row
  }
}

}  // namespace

void CrossEntropyRows(const __nv_bfloat16* logits, int64_t rows, int64_t vocab, int64_t ld,
                      const int64_t* targets, float* loss, __nv_bfloat16* grad,
                      cudaStream_t stream) {
  Require(rows >= 0, "CrossEntropyRows: rows must be >= 0");
  Require(vocab >= 1 && ld >= vocab, "CrossEntropyRows: vocab >= 1 and ld >= vocab");
  if (rows == 0) return;
  Require(logits && targets && loss, "CrossEntropyRows: logits, targets and loss must be non-null");
  const bool vector = vocab % 8 == 0 && ld % 8 == 0 && IsAligned(logits, 16) &&
                      (grad == nullptr || IsAligned(grad, 16));
  const int grid = static_cast<int>(rows < (int64_t{1} << 30) ? rows : (int64_t{1} << 30));
  if (vector) {
    RowsKernel<8><<<grid, kThreads, 0, stream>>>(logits, rows, vocab, ld, targets, loss, grad);
  } else {
    RowsKernel<1><<<grid, kThreads, 0, stream>>>(logits, rows, vocab, ld, targets, loss, grad);
  }
  TRELLIS_CHECK_LAUNCH();
}

}  // namespace trellis::kernels
