#pragma once
// The head's matmul and cross entropy fused over chunks of rows, so that the
// whole [N, vocab] logits (several GB at vocab 32k and 16k+ tokens, more with
// their fp32 copy and gradient) never exist at once.
//
// Each chunk's gradient is computed in the forward, while its logits are at
// hand (the fused-linear-cross-entropy approach): with l = x W^T and
// p = softmax(l), d(sum CE)/dl = p - onehot(target), zero on ignored rows, so
//   grad_x = (p - onehot) W,   grad_W = sum over chunks of (p - onehot)^T x.
// Backward then only scales the saved gradients by the incoming one: no
// recompute, and memory is one chunk of logits plus the two gradients.
// Under the ce_kernel fusion (fusions.h), CUDA bf16 chunks take their loss
// and p - onehot from one kernel of kernels/cross_entropy, written over the
// chunk's logits.

#include <cstdint>

#include "trainer_core/model/fusions.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

// Sum over positions with a target (targets[i] != -1) of the cross entropy of
// softmax(x W^T), in fp32 (fp64 when x is fp64), as a 0-dim tensor.
// x: [N, H]; weight: [V, H], same dtype as x; targets: [N] int64.
// The logits are computed in x's dtype and the softmax in fp32 (fp64), as
// cross_entropy(matmul(x, W^T).to(float)) would. Gradients are computed only
// when grad mode is on and x or weight requires grad; they come back in x's
// and weight's dtype. `fusions` picks the ce_kernel path (tests compare both).
torch::Tensor LinearCrossEntropySum(const torch::Tensor& x, const torch::Tensor& weight,
                                    const torch::Tensor& targets, int64_t chunk_rows,
                                    const Fusions& fusions = ActiveFusions());

// Rows per chunk such that one chunk's fp32 logits take about 256 MiB: large
// enough that the chunk's GEMMs keep a GPU busy, small next to the activations
// it replaces. At least 1.
int64_t CrossEntropyChunkRows(int64_t vocab);

}  // namespace trellis::train
