#pragma once
// SwiGLU's gating, silu(a) * b (a: the gate projection, b: the up
// projection), as one autograd function. Written as torch::silu(a) * b,
// autograd keeps a, silu(a) and b; this keeps a and b and recomputes the
// sigmoid in backward:
//   s = 1 / (1 + exp(-a)),  h = (a * s) * b
//   grad_b = grad_h * (a * s),  grad_a = (grad_h * b) * (s * (1 + a * (1 - s)))
// CUDA bf16 contiguous inputs take one kernel per pass (kernels/swiglu.h)
// when the trainer is built with kernels/ and the swiglu fusion is on
// (fusions.h). Otherwise ATen ops compute the same steps in fp32 for bf16 and
// half inputs, in the inputs' own dtype for fp32 and fp64, and round to that
// dtype once at the end.

#include "trainer_core/torch_api.h"

namespace trellis::train {

// a and b of one shape, floating dtype and device; h in their dtype.
torch::Tensor SwiGlu(const torch::Tensor& a, const torch::Tensor& b);

// The same on gate and up side by side, as one GEMM of both writes them:
// ab [..., 2F] holds a = ab[..., :F] and b = ab[..., F:]; h is [..., F], and
// ab's gradient comes back as one [..., 2F] tensor (the kernel writes both
// halves in one pass; the ATen path concatenates them).
torch::Tensor SwiGluPacked(const torch::Tensor& ab);

}  // namespace trellis::train
