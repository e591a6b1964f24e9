#pragma once
// RMSNorm, and the pre-norm block's residual add fused with the norm after it:
//   RmsNorm(x, w)        = x / sqrt(mean(x^2) + eps) * w   over the last dim
//   AddRmsNorm(x, a, w)  = {y = x + a, RmsNorm(y, w)}
// CUDA bf16 inputs take kernels/rms_norm (the rms_norm fusion, fusions.h,
// built with kernels/): forward one pass over the rows, backward one pass that
// also sums the residual's gradient and the weight's. Otherwise ATen:
// LibTorch's fused rms_norm where it has one, else the ops with fp32
// statistics (the reference the kernels are tested against).

#include "trainer_core/torch_api.h"

namespace trellis::train {

torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

struct ResidualNorm {
  torch::Tensor y;       // x + a, the residual stream
  torch::Tensor normed;  // RmsNorm(y, weight)
};
ResidualNorm AddRmsNorm(const torch::Tensor& x, const torch::Tensor& a, const torch::Tensor& weight,
                        double eps);

}  // namespace trellis::train
