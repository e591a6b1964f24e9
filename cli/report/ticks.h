#pragma once
// Axis ranges and tick positions that read at a glance (1, 2 or 5 x 10^k).
// Pure.

#include <vector>

namespace trellis::cli::report {

struct Axis {
  double lo = 0;
  double hi = 1;
  std::vector<double> ticks;  // ascending, within [lo, hi], at least two
};

// An axis over [lo, hi] with about `target` ticks, its bounds moved out to
// whole ticks. One value (lo == hi: a run of one step) is widened around it;
// non-finite bounds read as [0, 1]; lo > hi are swapped.
Axis NiceAxis(double lo, double hi, int target = 5);

// The same for integers (steps, ranks): ticks at whole numbers only.
Axis IntegerAxis(double lo, double hi, int target = 6);

}  // namespace trellis::cli::report
