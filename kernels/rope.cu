// One grid-stride loop over (row, head, chunk) items, a chunk being kWidth
// consecutive i of one head's first half: 8 (16-byte Bf16x8 accesses of x1, x2
// and out, two float4 of cos and of sin) or 1 (any alignment). The chunk is
// the fastest index, so neighbouring threads touch neighbouring bytes. The _rn
// intrinsics keep nvcc from contracting a multiply and an add into an fma, so
// each step rounds where the host reference's does.
#include "kernels/rope.h"

#include "kernels/launch_util.cuh"

namespace trellis::kernels {
namespace {

using detail::Bf16x8;
constexpr int kThreads = 256;

// x is read once: evict-first loads (__ldcs) leave L2 to the cos/sin table
// and to out, which the next kernel reads (about 10% faster at 16 heads on H200).
template <int kWidth>
__device__ __forceinline__ void LoadBf16(const __nv_bfloat16* p, float* out) {
  if constexpr (kWidth == 8) {
    const uint4 bits = __ldcs(reinterpret_cast<const uint4*>(p));
    Bf16x8 v;
    memcpy(&v, &bits, sizeof v);
    detail::Bf16x8ToFloat(v, out);
  } else {
    out[0] = __bfloat162float(__ldcs(p));
  }
}

template <int kWidth>
__device__ __forceinline__ void StoreBf16(__nv_bfloat16* p, const float* in) {
  if constexpr (kWidth == 8) {
    detail::StoreBf16x8(p, detail::FloatToBf16x8(in));
  } else {
    *p = __float2bfloat16_rn(in[0]);
  }
}

template <int kWidth>
__device__ __forceinline__ void LoadFloat(const float* p, float* out) {
  if constexpr (kWidth == 8) {
    const float4 lo = reinterpret_cast<const float4*>(p)[0];
    const float4 hi = reinterpret_cast<const float4*>(p)[1];
    out[0] = lo.x, out[1] = lo.y, out[2] = lo.z, out[3] = lo.w;
    out[4] = hi.x, out[5] = hi.y, out[6] = hi.z, out[7] = hi.w;
  } else {
    out[0] = *p;
  }
}

// Index is uint32_t whenever the items fit: three 64-bit divisions per item
// slowed the scalar path by half on H200 (106 vs 70 us at 16 heads; the vector
// path barely noticed). `period` = min(seq_len, rows) gives the same r % period.
template <int kWidth, bool kInverse, typename Index>
__global__ void __launch_bounds__(kThreads)
    RopeKernel(const __nv_bfloat16* __restrict__ x, int64_t x_row_stride, Index items,
               Index chunks, Index heads, Index period, int head_dim,
               const float* __restrict__ cos, const float* __restrict__ sin,
               __nv_bfloat16* __restrict__ out) {
  const int half = head_dim / 2;
  const Index stride = Index{gridDim.x} * kThreads;
  for (Index item = Index{blockIdx.x} * kThreads + threadIdx.x; item < items; item += stride) {
    const Index row_head = item / chunks;
    const Index row = row_head / heads;
    const int i = static_cast<int>(item - row_head * chunks) * kWidth;
    const int head = static_cast<int>(row_head - row * heads);
    const int64_t table = static_cast<int64_t>(row % period) * half + i;
    const __nv_bfloat16* xp = x + static_cast<int64_t>(row) * x_row_stride +
                              static_cast<int64_t>(head) * head_dim + i;
    __nv_bfloat16* op = out + static_cast<int64_t>(row_head) * head_dim + i;

    float x1[kWidth], x2[kWidth], c[kWidth], s[kWidth], o1[kWidth], o2[kWidth];
    LoadBf16<kWidth>(xp, x1);
    LoadBf16<kWidth>(xp + half, x2);
    LoadFloat<kWidth>(cos + table, c);
    LoadFloat<kWidth>(sin + table, s);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      if constexpr (kInverse) {
        o1[k] = __fadd_rn(__fmul_rn(x1[k], c[k]), __fmul_rn(x2[k], s[k]));
        o2[k] = __fadd_rn(-__fmul_rn(x1[k], s[k]), __fmul_rn(x2[k], c[k]));
      } else {
        o1[k] = __fsub_rn(__fmul_rn(x1[k], c[k]), __fmul_rn(x2[k], s[k]));
        o2[k] = __fadd_rn(__fmul_rn(x1[k], s[k]), __fmul_rn(x2[k], c[k]));
      }
    }
    StoreBf16<kWidth>(op, o1);
    StoreBf16<kWidth>(op + half, o2);
  }
}

template <int kWidth, bool kInverse>
void Launch(const __nv_bfloat16* x, int64_t x_row_stride, int64_t rows, int64_t seq_len,
            int heads, int head_dim, const float* cos, const float* sin, __nv_bfloat16* out,
            cudaStream_t stream) {
  const int64_t chunks = head_dim / 2 / kWidth;
  const int64_t items = rows * heads * chunks;
  const int64_t period = seq_len < rows ? seq_len : rows;
  // 64 waves: about one item per thread at the common sizes. At 40-44
  // registers only ~5 blocks fit an SM, and the few blocks left over from 8
  // waves ran as a tail at low occupancy (45 vs 36 us at 16 heads).
  const int grid = detail::GridFor(items, kThreads, 64);
  // Below 2^31 items, item + stride (< 2^31 too) cannot wrap a uint32_t.
  if (items < (int64_t{1} << 31)) {
    RopeKernel<kWidth, kInverse, uint32_t><<<grid, kThreads, 0, stream>>>(
        x, x_row_stride, static_cast<uint32_t>(items), static_cast<uint32_t>(chunks),
        static_cast<uint32_t>(heads), static_cast<uint32_t>(period), head_dim, cos, sin, out);
  } else {
    RopeKernel<kWidth, kInverse, int64_t><<<grid, kThreads, 0, stream>>>(
        x, x_row_stride, items, chunks, heads, period, head_dim, cos, sin, out);
  }
  TRELLIS_CHECK_LAUNCH();
}

}  // namespace

void Rope(const __nv_bfloat16* x, int64_t x_row_stride, int64_t rows, int64_t seq_len, int heads,
          int head_dim, const float* cos, const float* sin, bool inverse, __nv_bfloat16* out,
          cudaStream_t stream) {
  Require(head_dim > 0 && head_dim % 2 == 0, "Rope: head_dim must be even and > 0");
  Require(heads > 0, "Rope: heads must be > 0");
  Require(seq_len > 0, "Rope: seq_len must be > 0");
  Require(rows >= 0, "Rope: rows must be >= 0");
  const int64_t width = int64_t{heads} * head_dim;
  Require(x_row_stride >= width, "Rope: x_row_stride must be >= heads * head_dim");
  if (rows == 0) return;
  Require(x && cos && sin && out, "Rope: x, cos, sin and out must be non-null");
  // Byte ranges: x's last row ends at its width, not its stride.
  constexpr int64_t kBytes = sizeof(__nv_bfloat16);
  const auto x_begin = reinterpret_cast<uintptr_t>(x);
  const auto x_end = x_begin + ((rows - 1) * x_row_stride + width) * kBytes;
  const auto out_begin = reinterpret_cast<uintptr_t>(out);
  const auto out_end = out_begin + rows * width * kBytes;
  Require(out_end <= x_begin || x_end <= out_begin, "Rope: out must not overlap x");

  const bool vector = head_dim / 2 % 8 == 0 && x_row_stride % 8 == 0 && IsAligned(x, 16) &&
                      IsAligned(out, 16) && IsAligned(cos, 16) && IsAligned(sin, 16);
  using LaunchFn = void (*)(const __nv_bfloat16*, int64_t, int64_t, int64_t, int, int,
                            const float*, const float*, __nv_bfloat16*, cudaStream_t);
  const LaunchFn launch = vector ? (inverse ? &Launch<8, true> : &Launch<8, false>)
                                 : (inverse ? &Launch<1, true> : &Launch<1, false>);
  launch(x, x_row_stride, rows, seq_len, heads, head_dim, cos, sin, out, stream);
}

}  // namespace trellis::kernels
