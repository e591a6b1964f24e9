#include "cli/report/ticks.h"

#include <algorithm>
#include <cmath>

namespace trellis::cli::report {

namespace {

// The smallest of 1, 2, 5 x 10^k at or above `raw`.
double NiceStep(double raw) {
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw * (1 - 1e-9)) return m * magnitude;
  return 10 * magnitude;
}

Axis Build(double lo, double hi, double step) {
  Axis a;
  a.lo = std::floor(lo / step + 1e-9) * step;
  a.hi = std::ceil(hi / step - 1e-9) * step;
  if (a.hi <= a.lo) a.hi = a.lo + step;
  // Counted, not accumulated, so that 0.1 + 0.2 does not drift off a tick.
  long n = std::lround((a.hi - a.lo) / step);
  for (long i = 0; i <= n; ++i) {
    double t = a.lo + static_cast<double>(i) * step;
    a.ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return a;
}

}  // namespace

Axis NiceAxis(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return Build(0, 1, 0.2);
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo <= std::max(std::fabs(hi), std::fabs(lo)) * 1e-12) {
    double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  return Build(lo, hi, NiceStep((hi - lo) / std::max(target, 1)));
}

Axis IntegerAxis(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return Build(0, 1, 1);
  if (lo > hi) std::swap(lo, hi);
  lo = std::floor(lo);
  hi = std::ceil(hi);
  if (hi - lo < 1) {  // one step: show it between its neighbours
    lo -= 1;
    hi += 1;
  }
  return Build(lo, hi, std::max(1.0, NiceStep((hi - lo) / std::max(target, 1))));
}

}  // namespace trellis::cli::report
