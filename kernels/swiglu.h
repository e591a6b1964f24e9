// SwiGLU's elementwise part for the MoE experts, h = silu(a) * b (a: the gate
// projection, b: the up projection), and its backward, each one pass over n
// bf16 elements. Every step is an fp32 operation rounded once (no fused
// multiply-add), the outputs rounded to bf16 at the end:
//   s = 1 / (1 + exp(-a)),  silu = a * s
//   forward:   h = silu * b
//   backward:  grad_b = grad_h * silu
//              grad_a = (grad_h * b) * (s * (1 + a * (1 - s)))
// Backward recomputes s from a, so a caller keeps only a and b from forward.
// 1 / (1 + exp(-a)) needs no branch for large |a|: below a ~ -88.7 exp(-a)
// overflows to inf and s = 0 (silu = -0, grad_a = +-0); for large a it
// underflows and s = 1 (silu = a, grad_a = grad_h * b).
// kernels/ref/swiglu_ref.h takes the same steps on the host; only exp differs
// (CUDA's expf is within 2 ulp of exp), which moves a result by at most one
// bf16 ulp. Pointers may have any alignment (when all are 16-byte aligned,
// and for the strided variants width and in_stride are multiples of 8 or the
// rows are contiguous, 8 elements move per access); outputs must not overlap
// the inputs or each other.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace trellis::kernels {

void SwiGluForward(const __nv_bfloat16* a, const __nv_bfloat16* b, int64_t n, __nv_bfloat16* h,
                   cudaStream_t stream);

void SwiGluBackward(const __nv_bfloat16* grad_h, const __nv_bfloat16* a, const __nv_bfloat16* b,
                    int64_t n, __nv_bfloat16* grad_a, __nv_bfloat16* grad_b, cudaStream_t stream);

// rows x width elements; a's and b's rows start in_stride elements apart (a packed
// [rows, 2 * width] gate|up buffer: b = a + width, in_stride = 2 * width), h's rows
// width apart (dense [rows, width]); backward writes grad_a and grad_b with the inputs'
// in_stride (so the gradient of a packed buffer is again one packed buffer).
// grad_h is dense [rows, width]. Needs rows >= 0, width >= 0 and in_stride >= width;
// rows * width == 0 is nothing to do (null pointers accepted). grad_a and grad_b
// interleaved in one packed buffer do not overlap; neither may overlap an input.
void SwiGluForwardRows(const __nv_bfloat16* a, const __nv_bfloat16* b, int64_t rows,
                       int64_t width, int64_t in_stride, __nv_bfloat16* h, cudaStream_t stream);
void SwiGluBackwardRows(const __nv_bfloat16* grad_h, const __nv_bfloat16* a,
                        const __nv_bfloat16* b, int64_t rows, int64_t width, int64_t in_stride,
                        __nv_bfloat16* grad_a, __nv_bfloat16* grad_b, cudaStream_t stream);

}  // namespace trellis::kernels
