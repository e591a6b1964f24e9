// One block of 256 threads per row (grid-stride over the rows); thread t holds
// columns v * 2048 + 8 t .. + 7 for v < kVecs (kVecs * 2048 >= h; threads past
// h idle), so its slice of the weight, and in backward its slice of the
// weight's gradient, stay in registers across rows. A row's sum is a block
// sum: warps by shuffles, then the 8 warp sums in a fixed order. Backward
// writes each block's weight-gradient sums to the workspace, and a second
// kernel sums them over the blocks in order: the same bits on every run of a
// device.
#include "kernels/rms_norm.h"

#include <initializer_list>
#include <string>

#include "kernels/launch_util.cuh"

namespace trellis::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kBlockCols = kThreads * 8;

__device__ __forceinline__ void Load8(const __nv_bfloat16* p, float* out) {
  detail::Bf16x8ToFloat(detail::LoadBf16x8(p), out);
}

__device__ __forceinline__ void Store8(__nv_bfloat16* p, const float* in) {
  detail::StoreBf16x8(p, detail::FloatToBf16x8(in));
}

// The block's sum of v, the same value in every thread. `scratch` holds kWarps
// floats; the trailing barrier lets the next call reuse it.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float sum = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) sum = __fadd_rn(sum, scratch[w]);
  __syncthreads();
  return sum;
}

template <int kVecs>
__global__ void __launch_bounds__(kThreads)
    ForwardKernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ a,
                  const __nv_bfloat16* __restrict__ w, int64_t rows, int h, float eps,
                  __nv_bfloat16* __restrict__ y, __nv_bfloat16* __restrict__ out,
                  float* __restrict__ rstd) {
  __shared__ float scratch[kWarps];
  float wv[kVecs][8];
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const int col = v * kBlockCols + threadIdx.x * 8;
    if (col < h) Load8(w + col, wv[v]);
  }
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * h;
    float val[kVecs][8];
    float ss = 0.0f;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const int col = v * kBlockCols + threadIdx.x * 8;
      if (col >= h) continue;
      Load8(x + base + col, val[v]);
      if (a != nullptr) {
        float av[8];
        Load8(a + base + col, av);
#pragma unroll
        for (int i = 0; i < 8; ++i)  // y as a bf16 tensor holds it
          val[v][i] = __bfloat162float(__float2bfloat16_rn(__fadd_rn(val[v][i], av[i])));
        Store8(y + base + col, val[v]);
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) ss = __fadd_rn(ss, __fmul_rn(val[v][i], val[v][i]));
    }
    const float total = BlockSum(ss, scratch);
    const float rs = rsqrtf(__fadd_rn(__fdiv_rn(total, static_cast<float>(h)), eps));
    if (threadIdx.x == 0) rstd[r] = rs;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const int col = v * kBlockCols + threadIdx.x * 8;
      if (col >= h) continue;
      float o[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) o[i] = __fmul_rn(__fmul_rn(val[v][i], rs), wv[v][i]);
      Store8(out + base + col, o);
    }
  }
}

template <int kVecs>
__global__ void __launch_bounds__(kThreads)
    BackwardKernel(const __nv_bfloat16* __restrict__ g_out, const __nv_bfloat16* __restrict__ g_res,
                   const __nv_bfloat16* __restrict__ y, const __nv_bfloat16* __restrict__ w,
                   const float* __restrict__ rstd, int64_t rows, int h,
                   __nv_bfloat16* __restrict__ g_y, float* __restrict__ partial) {
  __shared__ float scratch[kWarps];
  float wv[kVecs][8], gw[kVecs][8];
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const int col = v * kBlockCols + threadIdx.x * 8;
#pragma unroll
    for (int i = 0; i < 8; ++i) gw[v][i] = 0.0f;
    if (col < h) Load8(w + col, wv[v]);
  }
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * h;
    const float rs = rstd[r];
    float go[kVecs][8], n[kVecs][8];
    float dot = 0.0f;  // sum of dn * n
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const int col = v * kBlockCols + threadIdx.x * 8;
      if (col >= h) continue;
      Load8(g_out + base + col, go[v]);
      Load8(y + base + col, n[v]);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        n[v][i] = __fmul_rn(n[v][i], rs);
        dot = __fadd_rn(dot, __fmul_rn(__fmul_rn(go[v][i], wv[v][i]), n[v][i]));
      }
    }
    const float mean = __fdiv_rn(BlockSum(dot, scratch), static_cast<float>(h));
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const int col = v * kBlockCols + threadIdx.x * 8;
      if (col >= h) continue;
      float res[8], gy[8];
      if (g_res != nullptr) {
        Load8(g_res + base + col, res);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) res[i] = 0.0f;
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float dn = __fmul_rn(go[v][i], wv[v][i]);
        gy[i] = __fadd_rn(__fmul_rn(rs, __fsub_rn(dn, __fmul_rn(n[v][i], mean))), res[i]);
        gw[v][i] = __fadd_rn(gw[v][i], __fmul_rn(go[v][i], n[v][i]));
      }
      Store8(g_y + base + col, gy);
    }
  }
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const int col = v * kBlockCols + threadIdx.x * 8;
    if (col >= h) continue;
#pragma unroll
    for (int i = 0; i < 8; ++i) partial[int64_t{blockIdx.x} * h + col + i] = gw[v][i];
  }
}

// g_w[col] = sum over b of partial[b][col], in a fixed order: a block per 32
// columns, its 32 rows of threads each summing every 32nd block (4 running
// sums, for loads in flight), then row 0 adding the 32 rows' sums in order.
constexpr int kSumCols = 32, kSumRows = 32;

__global__ void __launch_bounds__(kSumCols* kSumRows)
    SumBlocksKernel(const float* __restrict__ partial, int blocks, int h, float* __restrict__ g_w) {
  __shared__ float rows_sum[kSumRows][kSumCols + 1];
  const int col = blockIdx.x * kSumCols + threadIdx.x;
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (col < h) {
    int b = threadIdx.y, k = 0;
    for (; b < blocks; b += kSumRows, k = (k + 1) % 4)
      s[k] = __fadd_rn(s[k], partial[int64_t{b} * h + col]);
  }
  rows_sum[threadIdx.y][threadIdx.x] = __fadd_rn(__fadd_rn(s[0], s[1]), __fadd_rn(s[2], s[3]));
  __syncthreads();
  if (threadIdx.y != 0 || col >= h) return;
  float total = 0.0f;
  for (int r = 0; r < kSumRows; ++r) total = __fadd_rn(total, rows_sum[r][threadIdx.x]);
  g_w[col] = total;
}

int VecsFor(int64_t h) { return h <= kBlockCols ? 1 : 2; }

// As many blocks as fit on the device at once (the kernels loop over the
// rest), at most one per row.
template <typename Kernel>
int Blocks(Kernel kernel, int64_t rows) {
  int device = 0, sms = 0, per_sm = 0;
  TRELLIS_CUDA_CHECK(cudaGetDevice(&device));
  TRELLIS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  TRELLIS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
  const int64_t fit = int64_t{sms} * (per_sm > 0 ? per_sm : 1);
  return static_cast<int>(rows < fit ? (rows > 0 ? rows : 1) : fit);
}

int BackwardBlocks(int64_t rows, int64_t h) {
  return VecsFor(h) == 1 ? Blocks(BackwardKernel<1>, rows) : Blocks(BackwardKernel<2>, rows);
}

void Check(const char* name, int64_t rows, int64_t h, std::initializer_list<const void*> ptrs) {
  const std::string me = std::string(name) + ": ";
  Require(rows >= 0, me + "rows must be >= 0, got " + std::to_string(rows));
  Require(RmsNormSupports(h), me + "h must be a multiple of 8 in [8, " +
                                  std::to_string(kRmsNormMaxHidden) + "], got " +
                                  std::to_string(h));
  for (const void* p : ptrs)
    Require(p != nullptr && IsAligned(p, 16),
            me + "every buffer must be non-null and 16-byte aligned");
}

}  // namespace

bool RmsNormSupports(int64_t h) { return h >= 8 && h <= kRmsNormMaxHidden && h % 8 == 0; }

void RmsNormForward(const __nv_bfloat16* x, const __nv_bfloat16* a, const __nv_bfloat16* w,
                    int64_t rows, int64_t h, float eps, __nv_bfloat16* y, __nv_bfloat16* out,
                    float* rstd, cudaStream_t stream) {
  Check("RmsNormForward", rows, h, {x, w, out, rstd});
  Require((a == nullptr) == (y == nullptr),
          "RmsNormForward: a and y go together (both null: no residual add)");
  if (a != nullptr) Check("RmsNormForward", rows, h, {a, y});
  Require(eps >= 0.0f, "RmsNormForward: eps must be >= 0");
  if (rows == 0) return;
  const int hh = static_cast<int>(h);
  if (VecsFor(h) == 1) {
    ForwardKernel<1><<<Blocks(ForwardKernel<1>, rows), kThreads, 0, stream>>>(x, a, w, rows, hh,
                                                                              eps, y, out, rstd);
  } else {
    ForwardKernel<2><<<Blocks(ForwardKernel<2>, rows), kThreads, 0, stream>>>(x, a, w, rows, hh,
                                                                              eps, y, out, rstd);
  }
  TRELLIS_CHECK_LAUNCH();
}

int64_t RmsNormBackwardWorkspace(int64_t rows, int64_t h) {
  Require(RmsNormSupports(h), "RmsNormBackwardWorkspace: h must be a multiple of 8 in [8, " +
                                  std::to_string(kRmsNormMaxHidden) + "], got " +
                                  std::to_string(h));
  return int64_t{BackwardBlocks(rows, h)} * h;
}

void RmsNormBackward(const __nv_bfloat16* g_out, const __nv_bfloat16* g_res, const __nv_bfloat16* y,
                     const __nv_bfloat16* w, const float* rstd, int64_t rows, int64_t h,
                     __nv_bfloat16* g_y, float* g_w, float* workspace, cudaStream_t stream) {
  Check("RmsNormBackward", rows, h, {g_out, y, w, rstd, g_y, g_w, workspace});
  if (g_res != nullptr) Check("RmsNormBackward", rows, h, {g_res});
  const int grid = BackwardBlocks(rows, h), hh = static_cast<int>(h);
  if (rows == 0) {  // no rows: the blocks' sums are zeros
    TRELLIS_CUDA_CHECK(cudaMemsetAsync(workspace, 0, h * sizeof(float), stream));
  } else if (VecsFor(h) == 1) {
    BackwardKernel<1>
        <<<grid, kThreads, 0, stream>>>(g_out, g_res, y, w, rstd, rows, hh, g_y, workspace);
  } else {
    BackwardKernel<2>
        <<<grid, kThreads, 0, stream>>>(g_out, g_res, y, w, rstd, rows, hh, g_y, workspace);
  }
  TRELLIS_CHECK_LAUNCH();
  SumBlocksKernel<<<(hh + kSumCols - 1) / kSumCols, dim3(kSumCols, kSumRows), 0, stream>>>(
      workspace, grid, hh, g_w);
  TRELLIS_CHECK_LAUNCH();
}

}  // namespace trellis::kernels
