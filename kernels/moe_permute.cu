// Dispatch layout = a stable radix sort of slot numbers keyed by expert id
// (CUB's radix sort is stable), then one pass that inverts the permutation
// and finds each expert's first row. Permute, unpermute, combine and the
// combine's backward move whole rows with 16-byte accesses.
#include "kernels/moe_permute.h"

#include <cub/device/device_radix_sort.cuh>

#include "kernels/launch_util.cuh"

namespace trellis::kernels {
namespace {

constexpr int kThreads = 256;

size_t Align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

int KeyBits(int num_experts) {
  int bits = 1;
  while ((1 << bits) < num_experts) ++bits;
  return bits;
}

size_t SortTempBytes(int64_t num_slots, int num_experts) {
  size_t bytes = 0;
  TRELLIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<int>(num_slots), 0, KeyBits(num_experts)));
  return bytes;
}

__global__ void IotaKernel(int32_t* v, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * kThreads) {
    v[i] = static_cast<int32_t>(i);
  }
}

// sorted_ids are the expert ids in dispatch order. offsets[e] = first row whose
// expert is >= e; row r writes the entries between its predecessor's id and its own.
__global__ void InvertAndOffsetsKernel(const int32_t* sorted_ids, const int32_t* row_to_slot,
                                       int64_t num_rows, int num_experts, int32_t* slot_to_row,
                                       int32_t* offsets) {
  for (int64_t r = blockIdx.x * int64_t{kThreads} + threadIdx.x; r <= num_rows;
       r += int64_t{gridDim.x} * kThreads) {
    const int prev = r == 0 ? -1 : sorted_ids[r - 1];
    const int cur = r == num_rows ? num_experts : sorted_ids[r];
    for (int e = prev + 1; e <= cur && e <= num_experts; ++e) offsets[e] = static_cast<int32_t>(r);
    if (r < num_rows) slot_to_row[row_to_slot[r]] = static_cast<int32_t>(r);
  }
}

// dst row r <- src row slot_to_row[r]; a thread per 16 bytes.
__global__ void __launch_bounds__(kThreads)
    GatherRowsKernel(const __nv_bfloat16* __restrict__ src, int64_t num_rows, int64_t hidden,
                     __nv_bfloat16* __restrict__ dst, const int32_t* __restrict__ slot_to_row) {
  const int64_t per_row = hidden / 8;
  const int64_t chunks = num_rows * per_row;
  for (int64_t c = blockIdx.x * int64_t{kThreads} + threadIdx.x; c < chunks;
       c += int64_t{gridDim.x} * kThreads) {
    const int64_t row = c / per_row, col = (c - row * per_row) * 8;
    detail::StoreBf16x8(dst + row * hidden + col,
                        detail::LoadBf16x8(src + int64_t{slot_to_row[row]} * hidden + col));
  }
}

// The dispatch as a scatter: each thread reads one 16-byte chunk of a token
// once and writes it to the token's top_k dispatch rows. A gather per
// dispatch row read every token top_k times, from DRAM where the tokens
// outgrow L2 (moe-bench: 64 MiB of them).
__global__ void __launch_bounds__(kThreads)
    ScatterTokensKernel(const __nv_bfloat16* __restrict__ x,
                        const int32_t* __restrict__ slot_to_row, int64_t num_tokens, int top_k,
                        int64_t hidden, __nv_bfloat16* __restrict__ out) {
  const int64_t per_row = hidden / 8;
  const int64_t chunks = num_tokens * per_row;
  for (int64_t c = blockIdx.x * int64_t{kThreads} + threadIdx.x; c < chunks;
       c += int64_t{gridDim.x} * kThreads) {
    const int64_t t = c / per_row, col = (c - t * per_row) * 8;
    const detail::Bf16x8 v = detail::LoadBf16x8(x + t * hidden + col);
    for (int j = 0; j < top_k; ++j) {
      detail::StoreBf16x8(out + int64_t{slot_to_row[t * top_k + j]} * hidden + col, v);
    }
  }
}

// Each thread sums one token's 8-column chunk over its top_k slots. With
// kMaxK > 0 (top_k <= kMaxK) the slots' indices, then all their rows, are
// loaded before the sums, so that the loads are in flight together where
// the plain loop waits on each row in turn (moe-bench at 16 rows on an H200:
// 21.8 -> 20.6 ms per step for the combine and the dispatch's backward).
// The sum runs in slot order either way: the same bits.
template <int kMaxK>
__global__ void __launch_bounds__(kThreads)
    CombineKernel(const __nv_bfloat16* __restrict__ expert_out, const float* __restrict__ gates,
                  const int32_t* __restrict__ slot_to_row, int64_t num_tokens, int top_k,
                  int64_t hidden, __nv_bfloat16* __restrict__ out) {
  const int64_t per_row = hidden / 8;
  const int64_t chunks = num_tokens * per_row;
  for (int64_t c = blockIdx.x * int64_t{kThreads} + threadIdx.x; c < chunks;
       c += int64_t{gridDim.x} * kThreads) {
    const int64_t t = c / per_row, col = (c - t * per_row) * 8;
    float sum[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    auto add = [&](float g, const detail::Bf16x8& row) {
      float v[8];
      detail::Bf16x8ToFloat(row, v);
#pragma unroll
      for (int i = 0; i < 8; ++i) sum[i] = __fadd_rn(sum[i], __fmul_rn(g, v[i]));
    };
    if constexpr (kMaxK > 0) {
      int64_t row[kMaxK];
      float g[kMaxK];
#pragma unroll
      for (int j = 0; j < kMaxK; ++j) {
        if (j < top_k) {
          const int64_t s = t * top_k + j;
          row[j] = slot_to_row[s];
          g[j] = gates == nullptr ? 1.0f : gates[s];  // 1 * v is exact
        }
      }
      detail::Bf16x8 v[kMaxK];
#pragma unroll
      for (int j = 0; j < kMaxK; ++j)
        if (j < top_k) v[j] = detail::LoadBf16x8(expert_out + row[j] * hidden + col);
#pragma unroll
      for (int j = 0; j < kMaxK; ++j)
        if (j < top_k) add(g[j], v[j]);
    } else {
      for (int j = 0; j < top_k; ++j) {
        const int64_t s = t * top_k + j;
        add(gates == nullptr ? 1.0f : gates[s],
            detail::LoadBf16x8(expert_out + slot_to_row[s] * hidden + col));
      }
    }
    detail::StoreBf16x8(out + t * hidden + col, detail::FloatToBf16x8(sum));
  }
}

// Slots per token whose loads CombineKernel issues together (moe-bench's top 8).
constexpr int kCombineUnroll = 8;

constexpr int kWarpsPerBlock = kThreads / 32;

// A warp per dispatch row, its lanes striding the row 16 bytes at a time (the
// grad_y and expert_out loads are coalesced). Every lane of a warp shares the
// row, so all 32 reach the shuffles.
__global__ void __launch_bounds__(kThreads)
    CombineBackwardKernel(const __nv_bfloat16* __restrict__ grad_y,
                          const __nv_bfloat16* __restrict__ expert_out,
                          const float* __restrict__ gates,
                          const int32_t* __restrict__ row_to_slot, int64_t num_rows, int top_k,
                          int64_t hidden, __nv_bfloat16* __restrict__ grad_expert_out,
                          float* __restrict__ grad_gates) {
  const int lane = threadIdx.x % 32;
  const int64_t per_row = hidden / 8;
  for (int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32; r < num_rows;
       r += int64_t{gridDim.x} * kWarpsPerBlock) {
    const int64_t s = row_to_slot[r];
    const int64_t t = s / top_k;
    const float g = gates[s];
    const __nv_bfloat16* gy_row = grad_y + t * hidden;
    const __nv_bfloat16* eo_row = expert_out + r * hidden;
    __nv_bfloat16* out_row = grad_expert_out + r * hidden;
    float dot = 0.0f;
    // Unrolled so that several chunks' loads can be in flight per lane. The
    // kernel runs at about a third of the memory bandwidth; the unroll alone
    // did not change that (44 -> 43 ms per step at moe-bench's 16 rows).
#pragma unroll 4
    for (int64_t c = lane; c < per_row; c += 32) {
      float gy[8], eo[8], out[8];
      detail::Bf16x8ToFloat(detail::LoadBf16x8(gy_row + c * 8), gy);
      detail::Bf16x8ToFloat(detail::LoadBf16x8(eo_row + c * 8), eo);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        out[i] = __fmul_rn(g, gy[i]);
        dot = __fmaf_rn(gy[i], eo[i], dot);
      }
      detail::StoreBf16x8(out_row + c * 8, detail::FloatToBf16x8(out));
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    if (lane == 0) grad_gates[s] = dot;
  }
}

void CheckRows(const char* what, const void* a, const void* b, int64_t hidden) {
  Require(hidden > 0 && hidden % 8 == 0,
          std::string(what) + ": hidden must be a positive multiple of 8");
  Require(IsAligned(a, 16) && IsAligned(b, 16),
          std::string(what) + ": rows must be 16-byte aligned");
}

}  // namespace

size_t MoeLayoutWorkspaceBytes(int64_t num_slots, int num_experts) {
  return 2 * Align256(num_slots * sizeof(int32_t)) +
         Align256(SortTempBytes(num_slots, num_experts));
}

void ComputeMoeLayout(const int32_t* topk_ids, int64_t num_tokens, int top_k, int num_experts,
                      int32_t* offsets, int32_t* row_to_slot, int32_t* slot_to_row,
                      void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  Require(num_tokens >= 0 && top_k > 0 && num_experts > 0,
          "ComputeMoeLayout: num_tokens >= 0, top_k > 0, num_experts > 0");
  const int64_t slots = num_tokens * top_k;
  Require(slots < (int64_t{1} << 31), "ComputeMoeLayout: more than 2^31 slots");
  Require(workspace_bytes >= MoeLayoutWorkspaceBytes(slots, num_experts),
          "ComputeMoeLayout: workspace smaller than MoeLayoutWorkspaceBytes()");
  char* ws = static_cast<char*>(workspace);
  auto* sorted_ids = reinterpret_cast<int32_t*>(ws);
  auto* iota = reinterpret_cast<int32_t*>(ws + Align256(slots * sizeof(int32_t)));
  void* temp = ws + 2 * Align256(slots * sizeof(int32_t));
  size_t temp_bytes = SortTempBytes(slots, num_experts);
  if (slots > 0) {
    IotaKernel<<<detail::GridFor(slots, kThreads), kThreads, 0, stream>>>(iota, slots);
    TRELLIS_CHECK_LAUNCH();
    TRELLIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, topk_ids, sorted_ids,
                                                       iota, row_to_slot, static_cast<int>(slots),
                                                       0, KeyBits(num_experts), stream));
  }
  InvertAndOffsetsKernel<<<detail::GridFor(slots + 1, kThreads), kThreads, 0, stream>>>(
      sorted_ids, row_to_slot, slots, num_experts, slot_to_row, offsets);
  TRELLIS_CHECK_LAUNCH();
}

void MoePermute(const __nv_bfloat16* x, const int32_t* slot_to_row, int64_t num_tokens, int top_k,
                int64_t hidden, __nv_bfloat16* out, cudaStream_t stream) {
  CheckRows("MoePermute", x, out, hidden);
  Require(top_k > 0 && num_tokens >= 0, "MoePermute: top_k > 0, num_tokens >= 0");
  if (num_tokens == 0) return;
  ScatterTokensKernel<<<detail::GridFor(num_tokens * hidden / 8, kThreads), kThreads, 0,
                        stream>>>(x, slot_to_row, num_tokens, top_k, hidden, out);
  TRELLIS_CHECK_LAUNCH();
}

void MoeUnpermute(const __nv_bfloat16* permuted, const int32_t* slot_to_row, int64_t num_slots,
                  int64_t hidden, __nv_bfloat16* out, cudaStream_t stream) {
  CheckRows("MoeUnpermute", permuted, out, hidden);
  Require(num_slots >= 0, "MoeUnpermute: num_slots >= 0");
  if (num_slots == 0) return;
  GatherRowsKernel<<<detail::GridFor(num_slots * hidden / 8, kThreads), kThreads, 0, stream>>>(
      permuted, num_slots, hidden, out, slot_to_row);
  TRELLIS_CHECK_LAUNCH();
}

void MoeCombine(const __nv_bfloat16* expert_out, const float* gates, const int32_t* slot_to_row,
                int64_t num_tokens, int top_k, int64_t hidden, __nv_bfloat16* out,
                cudaStream_t stream) {
  CheckRows("MoeCombine", expert_out, out, hidden);
  Require(top_k > 0 && num_tokens >= 0, "MoeCombine: top_k > 0, num_tokens >= 0");
  if (num_tokens == 0) return;
  const int grid = detail::GridFor(num_tokens * hidden / 8, kThreads);
  if (top_k <= kCombineUnroll) {
    CombineKernel<kCombineUnroll><<<grid, kThreads, 0, stream>>>(expert_out, gates, slot_to_row,
                                                                 num_tokens, top_k, hidden, out);
  } else {
    CombineKernel<0><<<grid, kThreads, 0, stream>>>(expert_out, gates, slot_to_row, num_tokens,
                                                    top_k, hidden, out);
  }
  TRELLIS_CHECK_LAUNCH();
}

void MoeCombineBackward(const __nv_bfloat16* grad_y, const __nv_bfloat16* expert_out,
                        const float* gates, const int32_t* row_to_slot, int64_t num_tokens,
                        int top_k, int64_t hidden, __nv_bfloat16* grad_expert_out,
                        float* grad_gates, cudaStream_t stream) {
  CheckRows("MoeCombineBackward", grad_y, expert_out, hidden);
  CheckRows("MoeCombineBackward", grad_expert_out, grad_expert_out, hidden);
  Require(top_k > 0 && num_tokens >= 0, "MoeCombineBackward: top_k > 0, num_tokens >= 0");
  Require(gates != nullptr && grad_gates != nullptr,
          "MoeCombineBackward: gates and grad_gates are required");
  const int64_t num_rows = num_tokens * top_k;
  if (num_rows == 0) return;
  // GridFor counts rows here: kWarpsPerBlock of them per block.
  CombineBackwardKernel<<<detail::GridFor(num_rows, kWarpsPerBlock), kThreads, 0, stream>>>(
      grad_y, expert_out, gates, row_to_slot, num_rows, top_k, hidden, grad_expert_out,
      grad_gates);
  TRELLIS_CHECK_LAUNCH();
}

}  // namespace trellis::kernels
