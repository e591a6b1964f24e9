#pragma once
// Floating-point operations of one training step, counted from the model's
// shapes (a multiply-add is 2 FLOPs). The model's own work only: what a
// recompute (activation checkpointing) repeats is not counted, so MFU compares
// implementations that do or do not recompute on the same footing.
// Torch-free; the formula is written out in trainer_core/README.md.

#include <cstdint>

#include "common/spec/trainer_spec.h"

namespace trellis::train {

// Forward FLOPs of one token at sequence length `seq_len`: attention
// projections, causal attention (query i meets i + 1 keys: (T + 1) / 2 on
// average), router, the top-k (and shared) experts' SwiGLU, the LM head.
double ForwardFlopsPerToken(const spec::ModelSpec& m, int64_t seq_len);

// Training = forward + backward (twice the forward: gradients of inputs and
// of weights) = 3 x forward.
double TrainingFlopsPerToken(const spec::ModelSpec& m, int64_t seq_len);

// Muon's Newton-Schulz per optimizer step: for every matrix m x n (m <= n,
// the wide orientation) `ns_steps` x (X X^T: 2 m^2 n, A A: 2 m^3, B X: 2 m^2 n).
// Independent of the batch: this is the part of a step that small batches
// do not amortize.
double NewtonSchulzFlopsPerStep(const spec::ModelSpec& m, int ns_steps);

}  // namespace trellis::train
