#pragma once
// Inline SVG charts for `trellis report`'s page: lines over steps and bars.
// Every text is escaped; nothing is fetched (no xmlns or other reference:
// inline SVG in HTML needs none). Pure: a chart in, markup out.

#include <cmath>
#include <string>
#include <vector>

#include "cli/report/downsample.h"

namespace trellis::cli::report {

// The size every chart is drawn at (CSS scales it down to the page).
inline constexpr int kChartWidth = 960;
inline constexpr int kChartHeight = 300;

struct BandPoint {
  double x = 0;
  double lo = 0;
  double hi = 0;
  bool gap_before = false;
};

struct Series {
  std::string name;                // in the legend
  std::string color;               // a CSS colour
  std::string css_class;           // the line's <path> gets class "series <css_class>"
  std::vector<ChartPoint> points;  // non-finite ones are skipped, then Downsample()d
  std::vector<BandPoint> band;     // a min..max envelope behind the line; may be empty
};

// A vertical line at x (an event); its label shows on hover.
struct Mark {
  double x = 0;
  std::string label;
  std::string color;
};

struct LineChart {
  std::string id;     // the <svg>'s id
  std::string title;  // its accessible name
  std::string x_label;
  std::string y_label;  // with its unit: "tokens/s", "seconds"
  bool y_from_zero = false;
  std::vector<Series> series;
  std::vector<Mark> marks;             // those outside the points' x range are left out
  std::string empty_text = "no data";  // said instead when no series has a finite point
};

// <svg class="chart">...</svg>, or <p class="empty">empty_text</p>.
std::string RenderLineChart(const LineChart& chart);

struct BarGroup {  // one value of every bar: "free", "unattributed"
  std::string name;
  std::string color;
};

struct Bar {
  std::string label;           // under the bar (some are left out when crowded)
  std::vector<double> values;  // one per group; NaN draws nothing
  std::string tip;             // hover text
  double need = NAN;           // a mark across this bar's slot (its own threshold); NaN: none
};

// A horizontal reference line (a threshold).
struct RefLine {
  double y = 0;
  std::string label;
  std::string color;
};

struct BarChart {
  std::string id;
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<BarGroup> groups;
  std::vector<Bar> bars;
  std::vector<RefLine> lines;
  BarGroup need;  // the legend entry of the bars' `need` marks (shown when one is drawn)
  std::string empty_text = "no data";
};

std::string RenderBarChart(const BarChart& chart);

}  // namespace trellis::cli::report
