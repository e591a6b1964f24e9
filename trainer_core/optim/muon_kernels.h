#pragma once
// Muon's element-wise passes on the expert shards through kernels/muon_update.h
// (one pass for momentum and Nesterov update, one to apply the step and write
// the bf16 weight copy) instead of ATen's four to five. Built only where
// trainer_core links kernels/; the muon_update fusion (model/fusions.h)
// switches it off. Queued on LibTorch's current stream.

#include "trainer_core/torch_api.h"

namespace trellis::train {

// True for CUDA fp32 tensors when built with kernels/ and the fusion is on.
bool FusedMuonAvailable(const torch::Tensor& grad);

// mom = g + momentum * mom; update = g + momentum * mom (fp32 or bf16), with
// g = grad, or grad * grad_scale where grad_scale (a CUDA fp32 tensor of one
// element, read on the device) is defined: the clip factor, without a pass
// scaling grad in memory (grad is left as it was).
void FusedMuonMomentum(const torch::Tensor& grad, const torch::Tensor& mom,
                       const torch::Tensor& update, double momentum,
                       const torch::Tensor& grad_scale = {});

// Where FusedApplyUpdate's `copy` puts value's element i: rows of `row`
// elements starting `stride` apart (row == stride: contiguous; undefined
// copy: value's size for both). Throws naming what is wrong.
struct CopyRows {
  int64_t row, stride;
};
CopyRows CheckedCopyRows(const torch::Tensor& copy, int64_t n);

// value = value * decay + step * ortho; where `copy` is defined (bf16, as
// many elements as value) it receives bf16(value). value and ortho
// contiguous; copy contiguous, or [rows, cols] with dense rows spaced apart
// (expert gate or up rows in parallel/expert_form.h's compute form).
void FusedApplyUpdate(const torch::Tensor& value, const torch::Tensor& ortho, double decay,
                      double step, const torch::Tensor& copy);

}  // namespace trellis::train
