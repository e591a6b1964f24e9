#pragma once
// Which part of a step set its device-memory peak. A step's laps
// (compat::StepLaps) are forward and backward of each micro-batch in turn,
// then the optimizer; each lap has its own allocated peak. Pure.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace trellis::train {

struct PhasePeaks {
  int64_t forward = 0;    // the largest forward lap's (micro-batches: any of them)
  int64_t backward = 0;   // the largest backward lap's (with any recompute)
  int64_t optimizer = 0;  // clip, optimizers, router bias
};

// `lap_peaks`: 2 x micro_batches + 1 laps' peaks (forward, backward, ...,
// optimizer); nullopt for any other count (on the CPU there are none).
inline std::optional<PhasePeaks> PeaksByPhase(const std::vector<int64_t>& lap_peaks,
                                              int64_t micro_batches) {
  if (micro_batches < 1 || static_cast<int64_t>(lap_peaks.size()) != 2 * micro_batches + 1)
    return std::nullopt;
  PhasePeaks p;
  for (int64_t i = 0; i < micro_batches; ++i) {
    p.forward = std::max(p.forward, lap_peaks[2 * i]);
    p.backward = std::max(p.backward, lap_peaks[2 * i + 1]);
  }
  p.optimizer = lap_peaks.back();
  return p;
}

}  // namespace trellis::train
