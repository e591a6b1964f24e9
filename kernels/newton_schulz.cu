// Newton-Schulz over a batch of matrices. cuBLASLt is column-major: a
// row-major [s, l] X is the column-major l x s matrix Xc, so
//   A  = X X^T          ->  A  = Xc^T Xc                 (s x s)
//   B  = bA + cA A      ->  B  = c A A + b A              (C = A, D = B)
//   X' = aX + B X       ->  Xc' = Xc B^T + a Xc           (C = Xc, D = Xc')
// Lt's separate C and D outputs let the additions ride in the epilogue.
// With fused_output (opt-in until it has run on a GPU) the last step writes the fp32 result itself, in the caller's layout, with no
// conversion pass: X' = (B + aI) X with D = out (fp32, beta 0); aI is added to
// B's diagonal in bf16 first (Lt wants C and D of one type, so aX cannot ride
// in an fp32 epilogue from a bf16 C). When m > n, out = X'^T, so that product
// computes out = (B + aI) Xc^T instead.
#include "kernels/newton_schulz.h"

#include <cublasLt.h>

#include <algorithm>

#include <string>
#include <utility>

#include "kernels/launch_util.cuh"
#include "kernels/muon_update.h"
#include "kernels/ref/dense_ref.h"

#define TRELLIS_CUBLAS_CHECK(expr)                                                       \
  do {                                                                                   \
    const cublasStatus_t st_ = (expr);                                                   \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                  \
      throw ::trellis::kernels::CudaError(std::string(#expr) + " failed: " +             \
                                          cublasLtGetStatusString(st_));                 \
    }                                                                                    \
  } while (0)

namespace trellis::kernels {
namespace {

constexpr int kThreads = 256;
constexpr size_t kLtWorkspaceBytes = 64 << 20;
constexpr int kMaxSumChunks = 64;  // blocks summing one matrix's squares

// partials[b * chunks + chunk] = squares of chunk `chunk` of matrix b's
// elements; grid (chunks, batch). 16-byte loads when every matrix starts
// 16-byte aligned (elems % 4 == 0). No atomics: FinishSumsKernel adds the
// partials in a fixed order, so that the same input gives the same bits.
__global__ void SumSquaresKernel(const float* g, int64_t elems, float* partials) {
  const float* gb = g + blockIdx.y * elems;
  float s = 0.0f;
  int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  if (elems % 4 == 0) {
    const auto* g4 = reinterpret_cast<const float4*>(gb);
    float s1 = 0.0f;
    for (; i < elems / 4; i += stride) {
      const float4 v = __ldg(g4 + i);
      s = fmaf(v.x, v.x, s);
      s1 = fmaf(v.y, v.y, s1);
      s = fmaf(v.z, v.z, s);
      s1 = fmaf(v.w, v.w, s1);
    }
    s += s1;
  } else {
    for (; i < elems; i += stride) s = fmaf(gb[i], gb[i], s);
  }
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  __shared__ float warp_sums[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
    partials[blockIdx.y * gridDim.x + blockIdx.x] = total;
  }
}

// sumsq[b] = the `chunks` partials of matrix b added in a fixed order (each
// lane its strided share, then a fixed shuffle tree); grid (batch), 32 threads.
__global__ void FinishSumsKernel(const float* partials, int chunks, float* sumsq) {
  const float* pb = partials + blockIdx.x * chunks;
  float s = 0.0f;
  for (int j = threadIdx.x; j < chunks; j += 32) s += pb[j];
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (threadIdx.x == 0) sumsq[blockIdx.x] = s;
}

// x[b] = bf16(g[b] / (norm + eps)), [rows, cols] -> [cols, rows] when transposing.
// 32 x 32 tiles through shared memory keep both sides coalesced. grid (tiles, batch).
template <bool kTranspose>
__global__ void NormalizeKernel(const float* g, int rows, int cols, const float* sumsq,
                                __nv_bfloat16* x) {
  __shared__ float tile[32][33];
  const int64_t elems = int64_t{rows} * cols;
  const float inv = 1.0f / (sqrtf(sumsq[blockIdx.y]) + ref::kNsEps);
  const int tiles_c = (cols + 31) / 32;
  const int r0 = (blockIdx.x / tiles_c) * 32, c0 = (blockIdx.x % tiles_c) * 32;
  const float* gb = g + blockIdx.y * elems;
  __nv_bfloat16* xb = x + blockIdx.y * elems;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int r = r0 + i, c = c0 + threadIdx.x;
    const float v = (r < rows && c < cols) ? gb[int64_t{r} * cols + c] * inv : 0.0f;
    if (!kTranspose) {
      if (r < rows && c < cols) xb[int64_t{r} * cols + c] = __float2bfloat16_rn(v);
    } else {
      tile[i][threadIdx.x] = v;
    }
  }
  if (!kTranspose) return;
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int c = c0 + i, r = r0 + threadIdx.x;  // output row c, column r
    if (r < rows && c < cols) xb[int64_t{c} * rows + r] = __float2bfloat16_rn(tile[threadIdx.x][i]);
  }
}

// NormalizeKernel<true> with 16-byte accesses: 64 x 64 tiles, 256 threads,
// g read 4 floats at a time along its rows and x written 8 bf16 at a time
// along its own. Needs cols % 4 == 0, rows % 8 == 0 and g 16-byte aligned.
constexpr int kTile = 64;
__global__ void __launch_bounds__(256)
    NormalizeTransposedVectorKernel(const float* g, int rows, int cols, const float* sumsq,
                                    __nv_bfloat16* x) {
  __shared__ float tile[kTile][kTile + 1];  // [r - r0][c - c0]
  const int64_t elems = int64_t{rows} * cols;
  const float inv = 1.0f / (sqrtf(sumsq[blockIdx.y]) + ref::kNsEps);
  const int tiles_c = (cols + kTile - 1) / kTile;
  const int r0 = (blockIdx.x / tiles_c) * kTile, c0 = (blockIdx.x % tiles_c) * kTile;
  const float* gb = g + blockIdx.y * elems;
  __nv_bfloat16* xb = x + blockIdx.y * elems;
  for (int k = threadIdx.x; k < kTile * 16; k += blockDim.x) {
    const int dr = k / 16, dc = (k % 16) * 4;
    const int r = r0 + dr, c = c0 + dc;
    if (r >= rows || c >= cols) continue;
    const float4 v = __ldg(reinterpret_cast<const float4*>(gb + int64_t{r} * cols + c));
    tile[dr][dc] = v.x * inv;
    tile[dr][dc + 1] = v.y * inv;
    tile[dr][dc + 2] = v.z * inv;
    tile[dr][dc + 3] = v.w * inv;
  }
  __syncthreads();
  for (int k = threadIdx.x; k < kTile * 8; k += blockDim.x) {
    const int dc = k / 8, dr = (k % 8) * 8;
    const int c = c0 + dc, r = r0 + dr;
    if (c >= cols || r >= rows) continue;
    float v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = tile[dr + j][dc];
    detail::StoreBf16x8(xb + int64_t{c} * rows + r, detail::FloatToBf16x8(v));
  }
}

// b[m] += a I for every matrix m of the batch (s x s, bf16); grid (batch).
__global__ void AddDiagonalKernel(__nv_bfloat16* b, int s, float a) {
  __nv_bfloat16* bm = b + int64_t{blockIdx.x} * s * s;
  for (int i = threadIdx.x; i < s; i += blockDim.x) {
    const int64_t d = int64_t{i} * s + i;
    bm[d] = __float2bfloat16_rn(__bfloat162float(bm[d]) + a);
  }
}

// out[b] = float(x[b]), x is [rows, cols]; transposed back when kTranspose.
template <bool kTranspose>
__global__ void OutputKernel(const __nv_bfloat16* x, int rows, int cols, float* out) {
  __shared__ float tile[32][33];
  const int64_t elems = int64_t{rows} * cols;
  const int tiles_c = (cols + 31) / 32;
  const int r0 = (blockIdx.x / tiles_c) * 32, c0 = (blockIdx.x % tiles_c) * 32;
  const __nv_bfloat16* xb = x + blockIdx.y * elems;
  float* ob = out + blockIdx.y * elems;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int r = r0 + i, c = c0 + threadIdx.x;
    const float v = (r < rows && c < cols) ? __bfloat162float(xb[int64_t{r} * cols + c]) : 0.0f;
    if (!kTranspose) {
      if (r < rows && c < cols) ob[int64_t{r} * cols + c] = v;
    } else {
      tile[i][threadIdx.x] = v;
    }
  }
  if (!kTranspose) return;
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols) ob[int64_t{c} * rows + r] = tile[threadIdx.x][i];
  }
}

// x = bf16(g / (norm + eps)) elementwise, 4 values per thread (elems % 4 == 0); grid (chunks, batch).
__global__ void NormalizeFlatKernel(const float* g, int64_t elems, const float* sumsq,
                                    __nv_bfloat16* x) {
  const float inv = 1.0f / (sqrtf(sumsq[blockIdx.y]) + ref::kNsEps);
  const auto* g4 = reinterpret_cast<const float4*>(g + blockIdx.y * elems);
  auto* x4 = reinterpret_cast<uint2*>(x + blockIdx.y * elems);
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < elems / 4;
       i += int64_t{gridDim.x} * kThreads) {
    const float4 v = __ldg(g4 + i);
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x * inv, v.y * inv);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(v.z * inv, v.w * inv);
    uint2 packed;
    memcpy(&packed.x, &lo, 4);
    memcpy(&packed.y, &hi, 4);
    x4[i] = packed;
  }
}

cublasLtMatrixLayout_t Layout(int rows, int cols, int batch, cudaDataType type = CUDA_R_16BF) {
  cublasLtMatrixLayout_t l;
  TRELLIS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, rows, cols, rows));
  const int64_t stride = int64_t{rows} * cols;
  TRELLIS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                        &batch, sizeof(batch)));
  TRELLIS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
      l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  return l;
}

}  // namespace

// One planned product D = alpha op(A) op(B) + beta C.
struct Product {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

struct BatchedNewtonSchulz::Plan {
  cublasLtHandle_t handle = nullptr;
  void* lt_workspace = nullptr;
  __nv_bfloat16 *x = nullptr, *x_next = nullptr, *a = nullptr, *b = nullptr;
  float* sumsq = nullptr;
  float* partials = nullptr;  // kMaxSumChunks per matrix
  Product gram, poly, update;  // A = X X^T, B = bA + cA^2, X' = aX + BX
  Product last;                // fp32 out = (B + aI) X, in the caller's layout
  bool fused_output = false;   // off, or once Lt refused `last`: bf16 X', conversion pass
};

namespace {

Product PlanProduct(cublasLtHandle_t handle, cublasOperation_t op_a, cublasOperation_t op_b,
                    cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c) {
  Product p;
  p.a = a, p.b = b, p.c = c;
  TRELLIS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  TRELLIS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a,
                                                      sizeof(op_a)));
  TRELLIS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b,
                                                      sizeof(op_b)));
  cublasLtMatmulPreference_t pref;
  TRELLIS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kLtWorkspaceBytes;
  TRELLIS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  TRELLIS_CUBLAS_CHECK(
      cublasLtMatmulAlgoGetHeuristic(handle, p.desc, a, b, c, c, pref, 1, &result, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0) throw CudaError("BatchedNewtonSchulz: cuBLASLt found no algorithm");
  p.algo = result.algo;
  return p;
}

void RunProduct(cublasLtHandle_t handle, const Product& p, float alpha, const void* a,
                const void* b, float beta, const void* c, void* d, void* ws,
                cudaStream_t stream) {
  TRELLIS_CUBLAS_CHECK(cublasLtMatmul(handle, p.desc, &alpha, a, p.a, b, p.b, &beta, c, p.c, d,
                                      p.c, &p.algo, ws, kLtWorkspaceBytes, stream));
}

void Destroy(Product& p) {
  cublasLtMatmulDescDestroy(p.desc);
  cublasLtMatrixLayoutDestroy(p.a);
  if (p.b != p.a) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c != p.a && p.c != p.b) cublasLtMatrixLayoutDestroy(p.c);
}

}  // namespace

BatchedNewtonSchulz::BatchedNewtonSchulz(int batch, int m, int n, bool fused_output)
    : batch_(batch), m_(m), n_(n), plan_(new Plan) {
  Require(batch > 0 && m > 0 && n > 0, "BatchedNewtonSchulz: batch, m, n must be positive");
  const int s = std::min(m, n), l = std::max(m, n);
  Plan& p = *plan_;
  TRELLIS_CUBLAS_CHECK(cublasLtCreate(&p.handle));
  TRELLIS_CUDA_CHECK(cudaMalloc(&p.lt_workspace, kLtWorkspaceBytes));
  TRELLIS_CUDA_CHECK(cudaMalloc(&p.x, sizeof(__nv_bfloat16) * batch * s * l));
  TRELLIS_CUDA_CHECK(cudaMalloc(&p.x_next, sizeof(__nv_bfloat16) * batch * s * l));
  TRELLIS_CUDA_CHECK(cudaMalloc(&p.a, sizeof(__nv_bfloat16) * batch * s * s));
  TRELLIS_CUDA_CHECK(cudaMalloc(&p.b, sizeof(__nv_bfloat16) * batch * s * s));
  TRELLIS_CUDA_CHECK(cudaMalloc(&p.sumsq, sizeof(float) * batch));
  TRELLIS_CUDA_CHECK(cudaMalloc(&p.partials, sizeof(float) * batch * kMaxSumChunks));
  p.gram = PlanProduct(p.handle, CUBLAS_OP_T, CUBLAS_OP_N, Layout(l, s, batch), Layout(l, s, batch),
                       Layout(s, s, batch));
  p.poly = PlanProduct(p.handle, CUBLAS_OP_N, CUBLAS_OP_N, Layout(s, s, batch), Layout(s, s, batch),
                       Layout(s, s, batch));
  p.update = PlanProduct(p.handle, CUBLAS_OP_N, CUBLAS_OP_T, Layout(l, s, batch),
                         Layout(s, s, batch), Layout(l, s, batch));
  if (m <= n) {  // out [m, n] = Xc' (l x s, column-major) = Xc (B + aI)^T
    p.last = PlanProduct(p.handle, CUBLAS_OP_N, CUBLAS_OP_T, Layout(l, s, batch),
                         Layout(s, s, batch), Layout(l, s, batch, CUDA_R_32F));
  } else {  // out [m, n] = Xc'^T (s x l, column-major) = (B + aI) Xc^T
    p.last = PlanProduct(p.handle, CUBLAS_OP_N, CUBLAS_OP_T, Layout(s, s, batch),
                         Layout(l, s, batch), Layout(s, l, batch, CUDA_R_32F));
  }
  p.fused_output = fused_output;
}

BatchedNewtonSchulz::~BatchedNewtonSchulz() {
  Plan& p = *plan_;
  for (Product* prod : {&p.gram, &p.poly, &p.update, &p.last}) Destroy(*prod);
  cudaFree(p.lt_workspace);
  cudaFree(p.x);
  cudaFree(p.x_next);
  cudaFree(p.a);
  cudaFree(p.b);
  cudaFree(p.sumsq);
  cudaFree(p.partials);
  cublasLtDestroy(p.handle);
  delete plan_;
}

bool BatchedNewtonSchulz::FusedOutput() const { return plan_->fused_output; }

double BatchedNewtonSchulz::Flops(int steps) const {
  const double s = std::min(m_, n_), l = std::max(m_, n_);
  return 2.0 * batch_ * steps * (s * s * l + s * s * s + s * s * l);
}

bool BatchedNewtonSchulz::Iterate(const float* g, float* fused_out, cudaStream_t stream,
                                  int steps) {
  Require(steps >= 0, "BatchedNewtonSchulz: steps must be >= 0");
  Plan& p = *plan_;
  const bool transpose = m_ > n_;
  const int64_t elems = int64_t{m_} * n_;
  const int chunks = static_cast<int>(std::min<int64_t>((elems + 4095) / 4096, kMaxSumChunks));
  const dim3 sum_grid(chunks, batch_);
  SumSquaresKernel<<<sum_grid, kThreads, 0, stream>>>(g, elems, p.partials);
  TRELLIS_CHECK_LAUNCH();
  FinishSumsKernel<<<batch_, 32, 0, stream>>>(p.partials, chunks, p.sumsq);
  TRELLIS_CHECK_LAUNCH();
  const dim3 tile_grid(((m_ + 31) / 32) * ((n_ + 31) / 32), batch_), tile_block(32, 8);
  if (transpose && n_ % 4 == 0 && m_ % 8 == 0 && IsAligned(g, 16)) {
    const dim3 grid(((m_ + kTile - 1) / kTile) * ((n_ + kTile - 1) / kTile), batch_);
    NormalizeTransposedVectorKernel<<<grid, 256, 0, stream>>>(g, m_, n_, p.sumsq, p.x);
  } else if (transpose) {
    NormalizeKernel<true><<<tile_grid, tile_block, 0, stream>>>(g, m_, n_, p.sumsq, p.x);
  } else if (elems % 4 == 0) {
    NormalizeFlatKernel<<<sum_grid, kThreads, 0, stream>>>(g, elems, p.sumsq, p.x);
  } else {
    NormalizeKernel<false><<<tile_grid, tile_block, 0, stream>>>(g, m_, n_, p.sumsq, p.x);
  }
  TRELLIS_CHECK_LAUNCH();
  for (int step = 0; step < steps; ++step) {
    RunProduct(p.handle, p.gram, 1.0f, p.x, p.x, 0.0f, p.a, p.a, p.lt_workspace, stream);
    RunProduct(p.handle, p.poly, ref::kNsC, p.a, p.a, ref::kNsB, p.a, p.b, p.lt_workspace, stream);
    if (step + 1 < steps) {
      RunProduct(p.handle, p.update, 1.0f, p.x, p.b, ref::kNsA, p.x, p.x_next, p.lt_workspace,
                 stream);
      std::swap(p.x, p.x_next);
      continue;
    }
    AddDiagonalKernel<<<batch_, kThreads, 0, stream>>>(p.b, std::min(m_, n_), ref::kNsA);
    TRELLIS_CHECK_LAUNCH();
    if (fused_out != nullptr && p.fused_output) {
      const float one = 1.0f, zero = 0.0f;
      const void* a = transpose ? p.b : p.x;
      const void* b = transpose ? p.x : p.b;
      // Lt validates its arguments before it enqueues anything: a refusal leaves the
      // stream untouched, and the bf16 path below takes over for good.
      const cublasStatus_t st =
          cublasLtMatmul(p.handle, p.last.desc, &one, a, p.last.a, b, p.last.b, &zero, fused_out,
                         p.last.c, fused_out, p.last.c, &p.last.algo, p.lt_workspace,
                         kLtWorkspaceBytes, stream);
      if (st == CUBLAS_STATUS_SUCCESS) return true;
      p.fused_output = false;
    }
    // X' = (B + aI) X in bf16.
    RunProduct(p.handle, p.update, 1.0f, p.x, p.b, 0.0f, p.x, p.x_next, p.lt_workspace, stream);
    std::swap(p.x, p.x_next);
  }
  return false;
}

void BatchedNewtonSchulz::Run(const float* g, float* out, cudaStream_t stream, int steps) {
  if (Iterate(g, out, stream, steps)) return;
  // X lives as [s, l]: [n, m] when transposed, so reading it back transposes again.
  const dim3 out_grid(((m_ + 31) / 32) * ((n_ + 31) / 32), batch_), tile_block(32, 8);
  if (m_ > n_) {
    OutputKernel<true><<<out_grid, tile_block, 0, stream>>>(plan_->x, n_, m_, out);
  } else {
    OutputKernel<false><<<out_grid, tile_block, 0, stream>>>(plan_->x, m_, n_, out);
  }
  TRELLIS_CHECK_LAUNCH();
}

void BatchedNewtonSchulz::RunApply(const float* g, float* value, float decay, float step,
                                   __nv_bfloat16* copy, int64_t copy_row, int64_t copy_stride,
                                   cudaStream_t stream, int steps) {
  Iterate(g, nullptr, stream, steps);
  // X is [m, n], or [n, m] when transposed: the apply reads it through tiles then.
  ApplyUpdateBf16(value, plan_->x, batch_, m_, n_, m_ > n_, decay, step, copy, copy_row,
                  copy_stride, stream);
}

}  // namespace trellis::kernels
