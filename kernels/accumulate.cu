// Memory bound: 8 values per thread, one 16-byte load per received buffer and
// two for the accumulator, all issued before the sums.
#include "kernels/accumulate.h"

#include "kernels/launch_util.cuh"

namespace trellis::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBufs = 16;  // unrolled loads per thread; more buffers loop

__global__ void __launch_bounds__(kThreads) AccumulateKernel(float* __restrict__ acc,
                                                             const __nv_bfloat16* __restrict__ recv,
                                                             int num_bufs, int64_t n,
                                                             int64_t buf_stride) {
  const int64_t chunks = (n + 7) / 8;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; c < chunks;
       c += stride) {
    const int64_t i = c * 8;
    float sum[8];
    if (i + 8 <= n) {
      const float4 a = *reinterpret_cast<const float4*>(acc + i);
      const float4 b = *reinterpret_cast<const float4*>(acc + i + 4);
      sum[0] = a.x, sum[1] = a.y, sum[2] = a.z, sum[3] = a.w;
      sum[4] = b.x, sum[5] = b.y, sum[6] = b.z, sum[7] = b.w;
      for (int first = 0; first < num_bufs; first += kMaxBufs) {
        detail::Bf16x8 in[kMaxBufs];
#pragma unroll
        for (int b = 0; b < kMaxBufs; ++b) {
          if (first + b < num_bufs) {
            in[b] = detail::LoadBf16x8(recv + (first + b) * buf_stride + i);
          }
        }
#pragma unroll
        for (int b = 0; b < kMaxBufs; ++b) {
          if (first + b < num_bufs) {
            float v[8];
            detail::Bf16x8ToFloat(in[b], v);
#pragma unroll
            for (int j = 0; j < 8; ++j) sum[j] = __fadd_rn(sum[j], v[j]);
          }
        }
      }
      *reinterpret_cast<float4*>(acc + i) = make_float4(sum[0], sum[1], sum[2], sum[3]);
      *reinterpret_cast<float4*>(acc + i + 4) = make_float4(sum[4], sum[5], sum[6], sum[7]);
    } else {
      for (int64_t j = i; j < n; ++j) {
        float s = acc[j];
        for (int b = 0; b < num_bufs; ++b) s = __fadd_rn(s, __bfloat162float(recv[b * buf_stride + j]));
        acc[j] = s;
      }
    }
  }
}

// 8 values of the [rows, row_len] walk at a time where every row is 16-byte
// aligned, else one at a time; the rows of recv start recv_stride apart.
__global__ void __launch_bounds__(kThreads)
    AccumulateRowsKernel(float* __restrict__ acc, const __nv_bfloat16* __restrict__ recv,
                         int64_t n, int64_t row_len, int64_t recv_stride, bool overwrite,
                         bool vector) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  auto recv_at = [&](int64_t i) {
    const int64_t r = i / row_len;
    return r * recv_stride + (i - r * row_len);
  };
  if (vector) {
    for (int64_t c = first; c < n / 8; c += stride) {
      const int64_t i = c * 8;
      float v[8];
      detail::Bf16x8ToFloat(detail::LoadBf16x8(recv + recv_at(i)), v);
      float4* out = reinterpret_cast<float4*>(acc + i);
      if (!overwrite) {
        const float4 a = out[0], b = out[1];
        v[0] = __fadd_rn(a.x, v[0]), v[1] = __fadd_rn(a.y, v[1]);
        v[2] = __fadd_rn(a.z, v[2]), v[3] = __fadd_rn(a.w, v[3]);
        v[4] = __fadd_rn(b.x, v[4]), v[5] = __fadd_rn(b.y, v[5]);
        v[6] = __fadd_rn(b.z, v[6]), v[7] = __fadd_rn(b.w, v[7]);
      }
      out[0] = make_float4(v[0], v[1], v[2], v[3]);
      out[1] = make_float4(v[4], v[5], v[6], v[7]);
    }
    return;
  }
  for (int64_t i = first; i < n; i += stride) {
    const float v = __bfloat162float(recv[recv_at(i)]);
    acc[i] = overwrite ? v : __fadd_rn(acc[i], v);
  }
}

}  // namespace

void AccumulateBf16Rows(float* acc, const __nv_bfloat16* recv, int64_t rows, int64_t row_len,
                        int64_t recv_stride, bool overwrite, cudaStream_t stream) {
  Require(rows >= 0 && row_len >= 0, "AccumulateBf16Rows: rows and row_len must be >= 0");
  Require(rows <= 1 || recv_stride >= row_len,
          "AccumulateBf16Rows: recv_stride must be >= row_len");
  const int64_t n = rows * row_len;
  if (n == 0) return;
  Require(acc != nullptr && recv != nullptr, "AccumulateBf16Rows: acc and recv must be given");
  // One row is dense whatever its stride; several need rows of whole 16-byte words.
  const int64_t len = rows == 1 ? n : row_len, step = rows == 1 ? n : recv_stride;
  const bool vector = IsAligned(acc, 16) && IsAligned(recv, 16) && len % 8 == 0 && step % 8 == 0;
  const int grid = detail::GridFor(vector ? n / 8 : n, kThreads);
  AccumulateRowsKernel<<<grid, kThreads, 0, stream>>>(acc, recv, n, len, step, overwrite, vector);
  TRELLIS_CHECK_LAUNCH();
}

void AccumulateBf16(float* acc, const __nv_bfloat16* recv, int num_bufs, int64_t n,
                    int64_t buf_stride, cudaStream_t stream) {
  Require(n >= 0 && num_bufs >= 0, "AccumulateBf16: n and num_bufs must be >= 0");
  Require(num_bufs <= 1 || buf_stride >= n, "AccumulateBf16: buf_stride must be >= n");
  Require(buf_stride % 8 == 0, "AccumulateBf16: buf_stride must be a multiple of 8");
  Require(IsAligned(acc, 16) && IsAligned(recv, 16),
          "AccumulateBf16: acc and recv must be 16-byte aligned");
  if (n == 0 || num_bufs == 0) return;
  const int grid = detail::GridFor((n + 7) / 8, kThreads);
  AccumulateKernel<<<grid, kThreads, 0, stream>>>(acc, recv, num_bufs, n, buf_stride);
  TRELLIS_CHECK_LAUNCH();
}

}  // namespace trellis::kernels
