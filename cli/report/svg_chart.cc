#include "cli/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cli/report/html_text.h"
#include "cli/report/ticks.h"

namespace trellis::cli::report {

namespace {

// The plot area inside the chart: room for the legend above, tick labels and
// the axis labels left and below.
constexpr double kLeft = 72, kRight = 20, kTop = 30, kBottom = 46;
constexpr double kPlotWidth = kChartWidth - kLeft - kRight;
constexpr double kPlotHeight = kChartHeight - kTop - kBottom;
// Below this many points a line also gets a dot per point, with its values on hover.
constexpr size_t kDotsUpTo = 60;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

struct Scale {
  Axis x, y;
  double X(double v) const { return kLeft + (v - x.lo) / (x.hi - x.lo) * kPlotWidth; }
  double Y(double v) const { return kTop + (y.hi - v) / (y.hi - y.lo) * kPlotHeight; }
};

std::string Open(const std::string& id, const std::string& title) {
  return "<svg id=\"" + Escape(id) + "\" class=\"chart\" viewBox=\"0 0 " +
         std::to_string(kChartWidth) + " " + std::to_string(kChartHeight) + "\" width=\"" +
         std::to_string(kChartWidth) + "\" height=\"" + std::to_string(kChartHeight) +
         "\" role=\"img\" aria-label=\"" + Escape(title) + "\">\n";
}

std::string Text(double x, double y, const std::string& text, const char* anchor,
                 const char* css = "tick") {
  return "<text class=\"" + std::string(css) + "\" x=\"" + Num(x) + "\" y=\"" + Num(y) +
         "\" text-anchor=\"" + anchor + "\">" + Escape(text) + "</text>\n";
}

// Grid, y tick labels and both axis labels; x ticks when `x_ticks`.
std::string Frame(const Scale& s, const std::string& x_label, const std::string& y_label,
                  bool x_ticks) {
  std::string out;
  for (double t : s.y.ticks) {
    double y = s.Y(t);
    out += "<line class=\"grid\" x1=\"" + Num(kLeft) + "\" x2=\"" + Num(kLeft + kPlotWidth) +
           "\" y1=\"" + Num(y) + "\" y2=\"" + Num(y) + "\"/>\n";
    out += Text(kLeft - 6, y + 4, Compact(t), "end");
  }
  if (x_ticks) {
    for (double t : s.x.ticks) {
      double x = s.X(t);
      out += "<line class=\"axis\" x1=\"" + Num(x) + "\" x2=\"" + Num(x) + "\" y1=\"" +
             Num(kTop + kPlotHeight) + "\" y2=\"" + Num(kTop + kPlotHeight + 4) + "\"/>\n";
      out += Text(x, kTop + kPlotHeight + 17, Compact(t), "middle");
    }
  }
  out += "<line class=\"axis\" x1=\"" + Num(kLeft) + "\" x2=\"" + Num(kLeft + kPlotWidth) +
         "\" y1=\"" + Num(kTop + kPlotHeight) + "\" y2=\"" + Num(kTop + kPlotHeight) + "\"/>\n";
  out += Text(kLeft + kPlotWidth / 2, kChartHeight - 6, x_label, "middle", "label");
  out += "<text class=\"label\" text-anchor=\"middle\" transform=\"translate(16 " +
         Num(kTop + kPlotHeight / 2) + ") rotate(-90)\">" + Escape(y_label) + "</text>\n";
  return out;
}

// A legend entry per name, left to right above the plot.
std::string Legend(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out;
  double x = kLeft;
  for (const auto& [name, color] : entries) {
    out += "<rect x=\"" + Num(x) + "\" y=\"10\" width=\"14\" height=\"4\" fill=\"" + Escape(color) +
           "\"/>\n";
    out += Text(x + 18, 16, name, "start", "legend");
    x += 30 + 7.0 * static_cast<double>(name.size());
  }
  return out;
}

std::string LinePath(const Scale& s, const Series& series, const std::vector<ChartPoint>& pts) {
  std::string d;
  for (size_t i = 0; i < pts.size(); ++i) {
    d += (i == 0 || pts[i].gap_before) ? "M" : "L";
    d += Num(s.X(pts[i].x)) + " " + Num(s.Y(pts[i].y)) + " ";
  }
  if (!d.empty()) d.pop_back();
  std::string out = "<path class=\"series " + Escape(series.css_class) + "\" data-points=\"" +
                    std::to_string(pts.size()) + "\" fill=\"none\" stroke=\"" +
                    Escape(series.color) + "\" d=\"" + d + "\"/>\n";
  if (pts.size() <= kDotsUpTo) {
    for (const auto& p : pts) {
      out += "<circle class=\"dot\" cx=\"" + Num(s.X(p.x)) + "\" cy=\"" + Num(s.Y(p.y)) +
             "\" r=\"2.5\" fill=\"" + Escape(series.color) + "\"><title>" + Escape(p.tip) +
             "</title></circle>\n";
    }
  }
  return out;
}

// The envelope of each stretch without a gap: along the highs, back along the lows.
std::string BandPath(const Scale& s, const Series& series, const std::vector<BandPoint>& band) {
  std::string d;
  for (size_t begin = 0; begin < band.size();) {
    size_t end = begin + 1;
    while (end < band.size() && !band[end].gap_before) ++end;
    for (size_t i = begin; i < end; ++i)
      d += (i == begin ? "M" : "L") + Num(s.X(band[i].x)) + " " + Num(s.Y(band[i].hi)) + " ";
    for (size_t i = end; i-- > begin;)
      d += "L" + Num(s.X(band[i].x)) + " " + Num(s.Y(band[i].lo)) + " ";
    d += "Z ";
    begin = end;
  }
  if (d.empty()) return "";
  d.pop_back();
  return "<path class=\"band\" fill=\"" + Escape(series.color) + "\" d=\"" + d + "\"/>\n";
}

std::vector<BandPoint> FiniteBand(const std::vector<BandPoint>& band) {
  std::vector<BandPoint> out;
  bool gap = false;
  for (const auto& b : band) {
    gap = gap || b.gap_before;
    if (!std::isfinite(b.x) || !std::isfinite(b.lo) || !std::isfinite(b.hi)) continue;
    out.push_back(b);
    out.back().gap_before = gap;
    gap = false;
  }
  // As bounded as the lines: every n-th, with the last.
  if (out.size() > kMaxChartPoints) {
    size_t every = (out.size() + kMaxChartPoints - 1) / kMaxChartPoints;
    std::vector<BandPoint> kept;
    for (size_t i = 0; i < out.size(); ++i) {
      gap = gap || out[i].gap_before;
      if (i % every != 0 && i + 1 != out.size()) continue;
      kept.push_back(out[i]);
      kept.back().gap_before = gap;
      gap = false;
    }
    out = std::move(kept);
  }
  return out;
}

}  // namespace

std::string RenderLineChart(const LineChart& chart) {
  std::vector<std::vector<ChartPoint>> lines;
  std::vector<std::vector<BandPoint>> bands;
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const auto& series : chart.series) {
    lines.push_back(Downsample(FiniteOnly(series.points)));
    bands.push_back(FiniteBand(series.band));
    for (const auto& p : lines.back()) {
      x_lo = std::min(x_lo, p.x), x_hi = std::max(x_hi, p.x);
      y_lo = std::min(y_lo, p.y), y_hi = std::max(y_hi, p.y);
    }
    for (const auto& b : bands.back()) y_lo = std::min(y_lo, b.lo), y_hi = std::max(y_hi, b.hi);
  }
  if (!(x_lo <= x_hi)) return "<p class=\"empty\">" + Escape(chart.empty_text) + "</p>\n";
  if (chart.y_from_zero) y_lo = std::min(y_lo, 0.0);
  Scale s{IntegerAxis(x_lo, x_hi), NiceAxis(y_lo, y_hi)};

  std::string out = Open(chart.id, chart.title);
  out += Frame(s, chart.x_label, chart.y_label, /*x_ticks=*/true);
  std::vector<std::pair<std::string, std::string>> legend;
  for (const auto& series : chart.series) legend.push_back({series.name, series.color});
  if (chart.series.size() > 1) out += Legend(legend);
  std::vector<Mark> marks;
  for (const auto& m : chart.marks)
    if (m.x >= s.x.lo && m.x <= s.x.hi) marks.push_back(m);
  for (const auto& m : marks) {
    double x = s.X(m.x);
    out += "<line class=\"mark\" x1=\"" + Num(x) + "\" x2=\"" + Num(x) + "\" y1=\"" + Num(kTop) +
           "\" y2=\"" + Num(kTop + kPlotHeight) + "\" stroke=\"" + Escape(m.color) + "\"><title>" +
           Escape(m.label) + "</title></line>\n";
  }
  for (size_t i = 0; i < chart.series.size(); ++i) out += BandPath(s, chart.series[i], bands[i]);
  for (size_t i = 0; i < chart.series.size(); ++i) out += LinePath(s, chart.series[i], lines[i]);
  return out + "</svg>\n";
}

std::string RenderBarChart(const BarChart& chart) {
  double y_lo = 0, y_hi = -INFINITY;
  for (const auto& bar : chart.bars)
    for (double v : bar.values)
      if (std::isfinite(v)) y_lo = std::min(y_lo, v), y_hi = std::max(y_hi, v);
  if (!(y_hi >= y_lo)) return "<p class=\"empty\">" + Escape(chart.empty_text) + "</p>\n";
  for (const auto& l : chart.lines)
    if (std::isfinite(l.y)) y_hi = std::max(y_hi, l.y), y_lo = std::min(y_lo, l.y);
  bool needs = false;
  for (const auto& bar : chart.bars)
    if (std::isfinite(bar.need))
      needs = true, y_hi = std::max(y_hi, bar.need), y_lo = std::min(y_lo, bar.need);
  Scale s{Axis{0, 1, {}}, NiceAxis(y_lo, y_hi)};

  std::string out = Open(chart.id, chart.title);
  out += Frame(s, chart.x_label, chart.y_label, /*x_ticks=*/false);
  std::vector<std::pair<std::string, std::string>> legend;
  for (const auto& g : chart.groups) legend.push_back({g.name, g.color});
  for (const auto& l : chart.lines) legend.push_back({l.label, l.color});
  if (needs) legend.push_back({chart.need.name, chart.need.color});
  if (legend.size() > 1) out += Legend(legend);

  const double slot = kPlotWidth / static_cast<double>(chart.bars.size());
  const double groups = static_cast<double>(std::max<size_t>(chart.groups.size(), 1));
  const double width = std::max(slot * 0.8 / groups, 0.5);
  // Labels that fit: every n-th when they would overlap (about 7 px a character).
  size_t longest = 1;
  for (const auto& bar : chart.bars) longest = std::max(longest, bar.label.size());
  const size_t every = std::max<size_t>(
      1, static_cast<size_t>(std::ceil(7.0 * static_cast<double>(longest) / slot)));
  const double base = s.Y(std::max(0.0, s.y.lo));
  for (size_t i = 0; i < chart.bars.size(); ++i) {
    const Bar& bar = chart.bars[i];
    double left = kLeft + slot * static_cast<double>(i) + slot * 0.1;
    out += "<g class=\"bar\"><title>" + Escape(bar.tip) + "</title>\n";
    for (size_t g = 0; g < bar.values.size(); ++g) {
      double v = bar.values[g];
      if (!std::isfinite(v)) continue;
      double top = std::min(s.Y(v), base), height = std::fabs(s.Y(v) - base);
      std::string color = g < chart.groups.size() ? chart.groups[g].color : "#4e79a7";
      out += "<rect x=\"" + Num(left + width * static_cast<double>(g)) + "\" y=\"" + Num(top) +
             "\" width=\"" + Num(width) + "\" height=\"" + Num(std::max(height, 0.5)) +
             "\" fill=\"" + Escape(color) + "\"/>\n";
    }
    if (std::isfinite(bar.need)) {
      const double y = s.Y(bar.need);
      out += "<line class=\"need\" x1=\"" + Num(left - slot * 0.05) + "\" x2=\"" +
             Num(left + slot * 0.85) + "\" y1=\"" + Num(y) + "\" y2=\"" + Num(y) +
             "\" stroke=\"" + Escape(chart.need.color) + "\"/>\n";
    }
    out += "</g>\n";
    if (i % every == 0)
      out += Text(kLeft + slot * (static_cast<double>(i) + 0.5), kTop + kPlotHeight + 17, bar.label,
                  "middle");
  }
  for (const auto& l : chart.lines) {
    if (!std::isfinite(l.y)) continue;
    double y = s.Y(l.y);
    out += "<line class=\"threshold\" x1=\"" + Num(kLeft) + "\" x2=\"" + Num(kLeft + kPlotWidth) +
           "\" y1=\"" + Num(y) + "\" y2=\"" + Num(y) + "\" stroke=\"" + Escape(l.color) +
           "\"><title>" + Escape(l.label) + "</title></line>\n";
    out += Text(kLeft + kPlotWidth - 4, y - 4, l.label, "end", "threshold-label");
  }
  return out + "</svg>\n";
}

}  // namespace trellis::cli::report
