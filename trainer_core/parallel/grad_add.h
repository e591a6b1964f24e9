#pragma once
// into += grad for a shard's fp32 gradient and a bf16 weight copy's gradient
// (world 1, parallel/fsdp.h's DirectGrads). ATen's add of mixed dtypes runs
// its casting loop, one element per access; kernels/accumulate reads 8 bf16
// values per 16-byte access, with the same single fp32 add per element.
// Other dtypes, devices or layouts, or use_kernel false (the grad_add fusion
// off, model/fusions.h), take ATen's add.

#include <torch/torch.h>

#include "trainer_core/model/fusions.h"

namespace trellis::train {

// into: defined fp32, the shape of grad (or its number of elements).
void AddGradInto(torch::Tensor& into, const torch::Tensor& grad,
                 bool use_kernel = ActiveFusions().grad_add);

}  // namespace trellis::train
