#include "kernels/ref/swiglu_ref.h"

#include <cmath>

namespace trellis::kernels::ref {

float SigmoidRef(float a) { return 1.0f / (1.0f + std::exp(-a)); }

void SwiGluForwardRef(const float* a, const float* b, int64_t n, float* h) {
  for (int64_t i = 0; i < n; ++i) {
    const float silu = a[i] * SigmoidRef(a[i]);
    h[i] = silu * b[i];
  }
}

void SwiGluBackwardRef(const float* grad_h, const float* a, const float* b, int64_t n,
                       float* grad_a, float* grad_b) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = SigmoidRef(a[i]);
    const float silu = a[i] * s;
    grad_b[i] = grad_h[i] * silu;
    const float one_minus_s = 1.0f - s;
    const float dsilu = s * (1.0f + a[i] * one_minus_s);
    const float gb = grad_h[i] * b[i];
    grad_a[i] = gb * dsilu;
  }
}

}  // namespace trellis::kernels::ref
