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

}  // namespace trellis::kernels
