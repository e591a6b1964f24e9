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

#include <torch/torch.h>

namespace trellis::train {

// a and b of one shape, floating dtype and device; h in their dtype.
torch::Tensor SwiGlu(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace trellis::train
