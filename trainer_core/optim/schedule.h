#pragma once
// Learning-rate schedule: linear warmup, then cosine decay to a floor.
// Torch-free and pure, so the loop, the tests and a host agree on it.

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace trellis::train {

// Multiplier of the base learning rate for 0-based step `step` of `total`.
inline double LrScale(int64_t step, int64_t warmup, int64_t total, double min_ratio) {
  if (step < warmup) return static_cast<double>(step + 1) / static_cast<double>(warmup);
  double span = static_cast<double>(std::max<int64_t>(1, total - warmup));
  double progress = std::min(1.0, static_cast<double>(step - warmup) / span);
  return min_ratio + (1 - min_ratio) * 0.5 * (1 + std::cos(M_PI * progress));
}

}  // namespace trellis::train
