// CPU reference of kernels/cross_entropy.h in fp64, on logits that hold bf16
// values: the exact loss and softmax - onehot that the kernel rounds.
#pragma once

#include <cstdint>

namespace trellis::kernels::ref {

// logits [rows, vocab] dense; loss [rows]; grad [rows, vocab] (unrounded).
void CrossEntropyRowsRef(const float* logits, int64_t rows, int64_t vocab,
                         const int64_t* targets, double* loss, double* grad);

}  // namespace trellis::kernels::ref
