#pragma once
// Rotary position embedding as one autograd function. For x [B, T, heads, d]
// (any strides; the token at index t is at position t), with half = d / 2,
// c = cos[t, i], s = sin[t, i]:
//   y[.., i] = x[.., i] c - x[.., half + i] s,  y[.., half + i] = x[.., i] s + x[.., half + i] c
// and backward is the rotation by -angle. CUDA bf16 inputs with fp32 tables
// take one kernel per pass (kernels/rope.h: fp32 inside, read straight from a
// strided view such as q out of a joint q/k/v GEMM) when the trainer is built
// with kernels/ and the rope fusion is on (fusions.h). Otherwise ATen ops in
// the input's dtype, the tables rounded to it.

#include "trainer_core/model/layers.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

// y contiguous [B, T, heads, d] in x's dtype; rope's tables cover >= T positions.
torch::Tensor Rope(const torch::Tensor& x, const RopeCache& rope);

}  // namespace trellis::train
