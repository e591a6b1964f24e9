#pragma once
// The MoE dispatch and combine as autograd functions with hand-written
// backwards that only gather (no scatter-add: no atomics, deterministic).
// Each runs the plain ATen way, or through kernels/moe_permute when the
// trainer is built with kernels/, the rows are CUDA bf16 with a hidden size
// that is a multiple of 8, the gates fp32, and the moe_kernels fusion is on
// (fusions.h). The kernels keep the gates and every sum in fp32 and skip the
// [N, k, H] products and the gathered copies ATen makes; both ways compute the
// same function.
//
// Layout (kernels/ref/moe_layout.h): slot s = t * k + j is token t's j-th
// choice; dispatch rows hold the slots grouped by expert. row_to_slot maps a
// dispatch row to its slot and slot_to_row is its inverse; both have N * k
// entries, int32 or int64, on the rows' device (the kernels read int32: pass
// int32 to convert nothing).

#include <functional>

#include "trainer_core/torch_api.h"

namespace trellis::train {

// x [N, H] -> [N * k, H] with row r = x[row_to_slot[r] / k]. Backward:
// grad_x[t] = sum_j grad[slot_to_row[t * k + j]], j in order.
torch::Tensor DispatchRows(const torch::Tensor& x, const torch::Tensor& row_to_slot,
                           const torch::Tensor& slot_to_row, int64_t k);

// expert_out [N * k, H] in dispatch order, gates [N, k] ->
// y[t] = sum_j gates[t, j] * expert_out[slot_to_row[t * k + j]], [N, H] in
// expert_out's dtype. Gradients for expert_out and for gates (gates' dtype).
torch::Tensor CombineSlots(const torch::Tensor& expert_out, const torch::Tensor& gates,
                           const torch::Tensor& row_to_slot, const torch::Tensor& slot_to_row,
                           int64_t k);

// MoeForward's routed experts on CUDA: x's slots in dispatch order
// (`order`: dispatch row -> slot, int64, from a stable sort by expert) through
// `run`, combined back per token with `gates` [N, k]. The index tensors are
// built once, as int32. Runs on any device.
torch::Tensor DispatchRunCombine(const torch::Tensor& x, const torch::Tensor& gates,
                                 const torch::Tensor& order, int64_t k,
                                 const std::function<torch::Tensor(const torch::Tensor&)>& run);

}  // namespace trellis::train
