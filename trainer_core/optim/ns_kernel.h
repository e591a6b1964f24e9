#pragma once
// Muon's batched Newton-Schulz through kernels/ (BatchedNewtonSchulz:
// cuBLASLt products with the sums in their epilogues, fp32 in and out) instead
// of ATen. Built only where trainer_core links kernels/ (CUDA LibTorch and
// TRELLIS_WITH_CUDA), where it is the default: on moe-bench it cut the
// optimizer from 0.157 to 0.133 s per step on an H200 (bench/gpu/run.sh runs
// both); TRELLIS_KERNEL_NS=0 selects ATen's.

#include "trainer_core/torch_api.h"

namespace trellis::train {

// True when built with kernels/ unless TRELLIS_KERNEL_NS=0.
bool KernelNewtonSchulzEnabled();

// g: CUDA fp32 contiguous [batch, m, n]; returns the orthogonalized fp32
// [batch, m, n] (the same function as NewtonSchulz(g, steps, kBFloat16)).
// Queued on the default stream, where trainer_core's ATen work runs.
torch::Tensor KernelNewtonSchulz(const torch::Tensor& g, int steps);

// FusedApplyUpdate(value, KernelNewtonSchulz(g, steps), decay, step, copy)
// (optim/muon_kernels.h) with the same bits, the apply reading the result in
// bf16 where the products left it: no fp32 result in memory. value: CUDA fp32
// contiguous, g's size; copy as FusedApplyUpdate's.
void KernelNewtonSchulzApply(const torch::Tensor& g, int steps, const torch::Tensor& value,
                             double decay, double step, const torch::Tensor& copy);

}  // namespace trellis::train
