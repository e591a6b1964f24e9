// CPU references of kernels/swiglu.h: the same fp32 steps in the same order,
// each rounded once, on inputs that hold bf16 values. Outputs stay fp32; the
// kernels store FloatToBf16 of them (up to the device's expf, see swiglu.h).
#pragma once

#include <cstdint>

namespace trellis::kernels::ref {

// s = 1 / (1 + exp(-a)).
float SigmoidRef(float a);

// h = (a * s) * b.
void SwiGluForwardRef(const float* a, const float* b, int64_t n, float* h);

// grad_b = grad_h * (a * s); grad_a = (grad_h * b) * (s * (1 + a * (1 - s))).
void SwiGluBackwardRef(const float* grad_h, const float* a, const float* b, int64_t n,
                       float* grad_a, float* grad_b);

}  // namespace trellis::kernels::ref
