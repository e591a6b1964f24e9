// MoE token dispatch layout. A step routes T tokens to top_k experts each:
// topk_ids[T, top_k] (row-major) names the expert of slot s = t * top_k + j.
// The dispatch buffer holds one row per slot, grouped by expert in expert
// order, and inside a group in increasing slot order (stable). That layout is
// what the grouped GEMM and at::_grouped_mm consume.
#pragma once

#include <cstdint>
#include <vector>

namespace trellis::kernels::ref {

struct MoeLayout {
  // offsets[e] .. offsets[e + 1] are the rows of expert e; offsets[0] = 0,
  // offsets[E] = T * top_k. offsets + 1 are at::_grouped_mm's `offs`.
  std::vector<int32_t> offsets;
  std::vector<int32_t> row_to_slot;  // dispatch row -> slot
  std::vector<int32_t> slot_to_row;  // slot -> dispatch row
};

// Throws std::invalid_argument on an expert id outside [0, num_experts).
MoeLayout ComputeMoeLayoutRef(const int32_t* topk_ids, int64_t num_tokens, int top_k,
                              int num_experts);

// out[row, :] = x[row_to_slot[row] / top_k, :]; x is [T, hidden].
void PermuteRef(const float* x, const MoeLayout& layout, int top_k, int64_t hidden, float* out);
// out[slot, :] = permuted[slot_to_row[slot], :]  (out is [T * top_k, hidden]).
void UnpermuteRef(const float* permuted, const MoeLayout& layout, int64_t hidden, float* out);
// out[t, :] = sum_j gates[t, j] * expert_out[slot_to_row[t * top_k + j], :], j in order.
// gates == nullptr: every gate 1 (the dispatch's backward).
void CombineRef(const float* expert_out, const float* gates, const MoeLayout& layout,
                int64_t num_tokens, int top_k, int64_t hidden, float* out);
// CombineRef's backward: for dispatch row r, slot s = row_to_slot[r], token t = s / top_k,
//   grad_expert_out[r, :] = gates[s] * grad_y[t, :]  (a float product)
//   grad_gates[s] = sum_h grad_y[t, h] * expert_out[r, h]  (summed in double)
void CombineBackwardRef(const float* grad_y, const float* expert_out, const float* gates,
                        const MoeLayout& layout, int top_k, int64_t hidden,
                        float* grad_expert_out, float* grad_gates);

// acc[i] += recv[0][i] + recv[1][i] + ... (recv is [num_bufs, n]), summed in that order.
void AccumulateRef(float* acc, const float* recv, int num_bufs, int64_t n);

}  // namespace trellis::kernels::ref
