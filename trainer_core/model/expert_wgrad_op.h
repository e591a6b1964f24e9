#pragma once
// The expert_wgrad fusion (fusions.h): the routed experts' two grouped GEMMs
// with a backward that sums their weight gradients into the fp32 gradient
// itself, one cuBLAS GEMM per expert reading it as C (kernels/expert_wgrad).
// Autograd's path computes each micro-batch's weight gradient in bf16 and a
// second pass adds it into fp32: 10 bytes moved per expert weight per
// micro-batch, and a less exact sum. The input gradient is the same grouped
// GEMM as autograd's and runs beside the per-expert GEMMs.
//
// The GEMMs need the slots per expert on the host: forward copies them off
// the device without waiting (pinned memory and an event), and backward,
// long after, reads them.

#include "trainer_core/model/layers.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

// Whether this build and these expert inputs can take the fusion: built with
// kernels/, CUDA bf16, LibTorch with grouped GEMMs, and the fusion on.
bool ExpertWgradAvailable(torch::Device device, torch::ScalarType dtype);

// RunLocalExperts on w.gate_up and w.down with gradients summed into
// w.wgrad_into (both required); offs are counts' cumulative ends (int32).
// Throws where ExpertWgradAvailable is false: dropping the gradients
// silently is never an option.
torch::Tensor RunExpertsSummingWgrad(const torch::Tensor& xs, const torch::Tensor& counts,
                                     const torch::Tensor& offs, const ExpertWeights& w);

}  // namespace trellis::train
