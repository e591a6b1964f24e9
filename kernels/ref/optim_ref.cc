#include "kernels/ref/optim_ref.h"

#include <cmath>

namespace trellis::kernels::ref {

void MuonMomentumRef(const float* grad, float* mom, float* update, int64_t n, float momentum,
                     float grad_scale) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * grad_scale;
    mom[i] = std::fma(momentum, mom[i], g);
    update[i] = std::fma(momentum, mom[i], g);
  }
}

void ApplyUpdateRef(float* value, const float* ortho, int64_t n, float decay, float step) {
  for (int64_t i = 0; i < n; ++i) {
    const float decayed = value[i] * decay;
    value[i] = std::fma(step, ortho[i], decayed);
  }
}

}  // namespace trellis::kernels::ref
