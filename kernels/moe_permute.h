// MoE token dispatch on the GPU, the layout of kernels/ref/moe_layout.h:
// dispatch rows grouped by expert, stable (increasing slot order) inside a
// group. offsets has E + 1 entries (offsets[0] = 0); offsets + 1 is
// at::_grouped_mm's `offs`. Expert ids must lie in [0, E); others give an
// unspecified layout (the GPU cannot report them without a sync).
// Rows are bf16 [*, hidden] with hidden a multiple of 8 and 16-byte aligned
// pointers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace trellis::kernels {

// Scratch bytes ComputeMoeLayout needs (a stable radix sort of the slots).
size_t MoeLayoutWorkspaceBytes(int64_t num_slots, int num_experts);

// topk_ids [num_tokens, top_k] -> offsets [E + 1], row_to_slot and slot_to_row
// [num_tokens * top_k].
void ComputeMoeLayout(const int32_t* topk_ids, int64_t num_tokens, int top_k, int num_experts,
                      int32_t* offsets, int32_t* row_to_slot, int32_t* slot_to_row,
                      void* workspace, size_t workspace_bytes, cudaStream_t stream);

// out[slot_to_row[t * top_k + j]] = x[t] for j < top_k and t < num_tokens:
// the dispatch, each token read once and written to its top_k rows.
void MoePermute(const __nv_bfloat16* x, const int32_t* slot_to_row, int64_t num_tokens, int top_k,
                int64_t hidden, __nv_bfloat16* out, cudaStream_t stream);

// out[slot] = permuted[slot_to_row[slot]] for num_slots slots (rows back in slot order).
void MoeUnpermute(const __nv_bfloat16* permuted, const int32_t* slot_to_row, int64_t num_slots,
                  int64_t hidden, __nv_bfloat16* out, cudaStream_t stream);

// out[t] = sum_j gates[t, j] * expert_out[slot_to_row[t * top_k + j]], j in
// order, in fp32. The scatter-add of expert outputs back to tokens, written as
// a gather per token: deterministic and without atomics.
// gates == nullptr means every gate is 1: then it is the dispatch's backward,
// grad_x[t] = sum_j grad_rows[slot_to_row[t * top_k + j]].
void MoeCombine(const __nv_bfloat16* expert_out, const float* gates, const int32_t* slot_to_row,
                int64_t num_tokens, int top_k, int64_t hidden, __nv_bfloat16* out,
                cudaStream_t stream);

// MoeCombine's backward in one pass over the num_tokens * top_k dispatch rows:
// for row r, slot s = row_to_slot[r] and token t = s / top_k,
//   grad_expert_out[r] = gates[s] * grad_y[t]             (fp32 product, bf16 out)
//   grad_gates[s] = sum_h grad_y[t, h] * expert_out[r, h]  (fp32)
// A warp per row; the sum is a fixed shuffle tree: deterministic, no atomics.
void MoeCombineBackward(const __nv_bfloat16* grad_y, const __nv_bfloat16* expert_out,
                        const float* gates, const int32_t* row_to_slot, int64_t num_tokens,
                        int top_k, int64_t hidden, __nv_bfloat16* grad_expert_out,
                        float* grad_gates, cudaStream_t stream);

}  // namespace trellis::kernels
