// FP8 E4M3 blockwise quantization on the GPU, the format of
// kernels/ref/fp8_e4m3.h: blocks of 128 consecutive values, one fp32 scale per
// block (scales has ceil(n / 128) entries), q = e4m3(x * (448 * (1 / amax)))
// with round-to-nearest-even and saturation, scale = amax * (1 / 448).
// Encodings match the CPU reference bit for bit. Pointers: x, out 16-byte
// aligned; q 8-byte aligned.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace trellis::kernels {

void QuantizeFp8Blockwise(const float* x, int64_t n, uint8_t* q, float* scales,
                          cudaStream_t stream);
void QuantizeFp8Blockwise(const __nv_bfloat16* x, int64_t n, uint8_t* q, float* scales,
                          cudaStream_t stream);

void DequantizeFp8Blockwise(const uint8_t* q, const float* scales, int64_t n, float* out,
                            cudaStream_t stream);
void DequantizeFp8Blockwise(const uint8_t* q, const float* scales, int64_t n,
                            __nv_bfloat16* out, cudaStream_t stream);

}  // namespace trellis::kernels
