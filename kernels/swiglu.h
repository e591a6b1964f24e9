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
// 8 elements move per access); outputs must not overlap the inputs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace trellis::kernels {

void SwiGluForward(const __nv_bfloat16* a, const __nv_bfloat16* b, int64_t n, __nv_bfloat16* h,
                   cudaStream_t stream);

void SwiGluBackward(const __nv_bfloat16* grad_h, const __nv_bfloat16* a, const __nv_bfloat16* b,
                    int64_t n, __nv_bfloat16* grad_a, __nv_bfloat16* grad_b, cudaStream_t stream);

}  // namespace trellis::kernels
