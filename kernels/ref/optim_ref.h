// CPU references of kernels/muon_update.h, element by element with the same
// roundings (fma rounds once; value * decay rounds before it).
#pragma once

#include <cstdint>

namespace trellis::kernels::ref {

// mom = fma(momentum, mom, grad); update = fma(momentum, mom, grad).
void MuonMomentumRef(const float* grad, float* mom, float* update, int64_t n, float momentum);

// value = fma(step, ortho, value * decay).
void ApplyUpdateRef(float* value, const float* ortho, int64_t n, float decay, float step);

}  // namespace trellis::kernels::ref
