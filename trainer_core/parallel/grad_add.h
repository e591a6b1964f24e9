#pragma once
// A step's gradient contributions summed into the fp32 accumulator of a
// shard. A bf16 contribution on CUDA goes through kernels/accumulate.h (one
// vectorized pass, the same fp32 sums) when the trainer is built with
// kernels/ and the grad_add fusion is on (model/fusions.h); ATen's add_
// otherwise, whose mixed-dtype path is not vectorized.

#include <torch/torch.h>

namespace trellis::train {

// into += grad, for grad of into's numel (any floating dtype).
void AddGrad(torch::Tensor& into, const torch::Tensor& grad);

}  // namespace trellis::train
