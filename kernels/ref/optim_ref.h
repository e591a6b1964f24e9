// CPU references of kernels/muon_update.h, element by element with the same
// roundings (fma rounds once; value * decay rounds before it).
#pragma once

#include <cstdint>

namespace trellis::kernels::ref {

// g = grad * grad_scale (rounded once); mom = fma(momentum, mom, g);
// update = fma(momentum, mom, g).
void MuonMomentumRef(const float* grad, float* mom, float* update, int64_t n, float momentum,
                     float grad_scale = 1.0f);

// value = fma(step, ortho, value * decay).
void ApplyUpdateRef(float* value, const float* ortho, int64_t n, float decay, float step);

}  // namespace trellis::kernels::ref
