// Receive-and-accumulate for the bf16 gradient reduction: the owner of a shard
// receives one bf16 buffer from every peer and sums them into its fp32
// accumulator, acc[i] += recv[0][i] + recv[1][i] + ... in that order (the CPU
// reference sums in the same order, so results match to the last bit).
// recv buffer b starts at recv + b * buf_stride (elements). acc and every
// buffer 16-byte aligned (buf_stride a multiple of 8).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace trellis::kernels {

void AccumulateBf16(float* acc, const __nv_bfloat16* recv, int num_bufs, int64_t n,
                    int64_t buf_stride, cudaStream_t stream);

// One bf16 matrix whose rows lie recv_stride elements apart, into a dense
// fp32 one: acc[r * row_len + j] += recv[r * recv_stride + j] (with
// `overwrite`, = instead of +=) for r < rows, j < row_len: a weight-copy
// gradient in another layout added to the fp32 gradient (an expert's gate or
// up rows in trainer_core's compute form, parallel/expert_form.h). One fp32
// add per element, as ATen's add of the bf16 value rounds it. Any alignment:
// 16-byte aligned pointers with row_len and recv_stride multiples of 8 (or
// one row) move 8 values per access.
void AccumulateBf16Rows(float* acc, const __nv_bfloat16* recv, int64_t rows, int64_t row_len,
                        int64_t recv_stride, bool overwrite, cudaStream_t stream);

}  // namespace trellis::kernels
