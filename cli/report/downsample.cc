#include "cli/report/downsample.h"

#include <algorithm>
#include <cmath>

namespace trellis::cli::report {

std::vector<ChartPoint> FiniteOnly(const std::vector<ChartPoint>& points) {
  std::vector<ChartPoint> out;
  out.reserve(points.size());
  bool gap = false;
  for (const auto& p : points) {
    gap = gap || p.gap_before;
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    out.push_back(p);
    out.back().gap_before = gap;
    gap = false;
  }
  return out;
}

std::vector<ChartPoint> Downsample(const std::vector<ChartPoint>& points, size_t max_points) {
  max_points = std::max<size_t>(max_points, 3);
  if (points.size() <= max_points) return points;
  const size_t buckets = max_points / 3;
  const size_t per_bucket = (points.size() + buckets - 1) / buckets;
  std::vector<ChartPoint> out;
  out.reserve(max_points);
  bool gap = false;
  for (size_t begin = 0; begin < points.size(); begin += per_bucket) {
    size_t end = std::min(points.size(), begin + per_bucket);
    size_t lo = begin, hi = begin;
    for (size_t i = begin; i < end; ++i) {
      if (points[i].y < points[lo].y) lo = i;
      if (points[i].y > points[hi].y) hi = i;
    }
    size_t keep[3] = {lo, hi, end - 1};
    std::sort(keep, keep + 3);
    size_t next = begin;  // the first point whose gap is not yet carried
    for (size_t k = 0; k < 3; ++k) {
      if (k > 0 && keep[k] == keep[k - 1]) continue;
      for (; next <= keep[k]; ++next) gap = gap || points[next].gap_before;
      out.push_back(points[keep[k]]);
      out.back().gap_before = gap;
      gap = false;
    }
  }
  return out;
}

Groups GroupMax(const std::vector<double>& values, size_t max_groups) {
  Groups g;
  max_groups = std::max<size_t>(max_groups, 1);
  g.size = std::max<size_t>(1, (values.size() + max_groups - 1) / max_groups);
  for (size_t begin = 0; begin < values.size(); begin += g.size) {
    size_t end = std::min(values.size(), begin + g.size);
    double m = values[begin];
    for (size_t i = begin + 1; i < end; ++i)
      if (std::isnan(m) || values[i] > m) m = values[i];
    g.max.push_back(m);
    g.first.push_back(begin);
  }
  return g;
}

}  // namespace trellis::cli::report
