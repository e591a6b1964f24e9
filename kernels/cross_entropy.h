// The cross entropy of bf16 logits, row by row, and its gradient written in
// place of the logits: one kernel for what log_softmax, gather, exp and the
// target's scatter do as four passes (trainer_core's chunked head,
// model/loss.cc). For row r of logits [rows, vocab] (rows `ld` elements
// apart) and its target t = targets[r]:
//   m = max_j x[j],  s = sum_j exp(x[j] - m),  lse = m + log(s)   (fp32)
//   loss[r] = lse - x[t]                                          (fp32)
//   grad[j] = bf16(exp(x[j] - lse)),  grad[t] = bf16(exp(x[t] - lse) - 1)
// t == -1 marks an ignored row: loss 0 and a zero gradient row, so the GEMMs
// that take the gradient need no mask. Any other t outside [0, vocab) gives
// a NaN loss (and a zero gradient row): a bad target is never a silent 0.
// grad may be null (the loss alone) or equal to logits (in place); otherwise
// it must not overlap them. kernels/ref/cross_entropy_ref.h is the host
// reference; only the order of the fp32 sum and the device's expf / logf
// differ from it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace trellis::kernels {

// rows >= 0, vocab >= 1, ld >= vocab; rows == 0 is nothing to do. 16-byte
// aligned logits and grad with vocab and ld multiples of 8 move 8 values per
// access.
void CrossEntropyRows(const __nv_bfloat16* logits, int64_t rows, int64_t vocab, int64_t ld,
                      const int64_t* targets, float* loss, __nv_bfloat16* grad,
                      cudaStream_t stream);

}  // namespace trellis::kernels
