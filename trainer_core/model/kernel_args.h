#pragma once
// What the autograd functions hand to kernels/: bf16 pointers and the stream.
// Only for builds with kernels/ (TRELLIS_WITH_KERNELS).

#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "trainer_core/torch_api.h"

namespace trellis::train {

// at::BFloat16 and __nv_bfloat16 are the same 16 bits.
inline __nv_bfloat16* Bf16(const torch::Tensor& t) {
  return reinterpret_cast<__nv_bfloat16*>(t.data_ptr<at::BFloat16>());
}

// LibTorch's current stream, where the ATen ops around the kernel run
// (autograd runs a backward on its forward's stream).
inline cudaStream_t CurrentStream() { return c10::cuda::getCurrentCUDAStream().stream(); }

}  // namespace trellis::train
