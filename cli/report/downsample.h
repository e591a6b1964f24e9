#pragma once
// Bounding what a chart draws. The controller folds a run's steps into at
// most RunStepsRequest.max_points points already; this keeps every series
// within kMaxChartPoints whatever it was sent, and folds ranks into bars.
// Pure.

#include <cstddef>
#include <string>
#include <vector>

namespace trellis::cli::report {

inline constexpr size_t kMaxChartPoints = 2000;

struct ChartPoint {
  double x = 0;
  double y = 0;
  bool gap_before = false;  // a new launch starts here: the line is not drawn across
  std::string tip;          // hover text (plain; escaped when drawn)
};

// The points with a finite x and y, in order. A dropped point's gap carries
// to the next kept one.
std::vector<ChartPoint> FiniteOnly(const std::vector<ChartPoint>& points);

// At most `max_points` of `points` (>= 3), in order: each of about
// max_points / 3 buckets of consecutive points keeps its lowest, its highest
// and its last, so spikes and the newest value survive. A gap inside a
// bucket carries to the next kept point. Fewer points come back unchanged.
std::vector<ChartPoint> Downsample(const std::vector<ChartPoint>& points,
                                   size_t max_points = kMaxChartPoints);

// Consecutive values folded into at most `max_groups` groups of equal size
// (the last may be smaller), each by its largest: for bars, where the slow
// one is what matters. first[i] is the index of group i's first value.
struct Groups {
  std::vector<double> max;
  std::vector<size_t> first;
  size_t size = 1;  // values per group
};
Groups GroupMax(const std::vector<double>& values, size_t max_groups);

}  // namespace trellis::cli::report
