#include "kernels/ref/optim_ref.h"

#include <cmath>

namespace trellis::kernels::ref {

void MuonMomentumRef(const float* grad, float* mom, float* update, int64_t n, float momentum) {
  for (int64_t i = 0; i < n; ++i) {
    mom[i] = std::fma(momentum, mom[i], grad[i]);
    update[i] = std::fma(momentum, mom[i], grad[i]);
  }
}

void ApplyUpdateRef(float* value, const float* ortho, int64_t n, float decay, float step) {
  for (int64_t i = 0; i < n; ++i) {
    const float decayed = value[i] * decay;
    value[i] = std::fma(step, ortho[i], decayed);
  }
}

}  // namespace trellis::kernels::ref
