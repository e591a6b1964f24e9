// The pure pieces of `trellis report`: escaping, numbers, ticks,
// downsampling and the SVG charts.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cli/report/downsample.h"
#include "cli/report/html_text.h"
#include "cli/report/svg_chart.h"
#include "cli/report/ticks.h"
#include "tests/report/report_test_util.h"

namespace trellis::cli::report {
namespace {

using test_util::Count;
using test_util::NestingProblem;
using test_util::PathData;
using test_util::PathPoints;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(ReportTextTest, EscapesMarkupQuotesAndControlCharacters) {
  EXPECT_EQ(Escape("<script>alert('x')</script> & \"y\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;y&quot;");
  EXPECT_EQ(Escape(std::string("a\x01"
                               "b\x1b[31mc\td\ne",
                               13)),
            "a b [31mc\td\ne");
  EXPECT_EQ(Escape("naïve ✓"), "naïve ✓");  // UTF-8 passes through
}

TEST(ReportTextTest, CompactNumbers) {
  EXPECT_EQ(Compact(0), "0");
  EXPECT_EQ(Compact(0.25), "0.25");
  EXPECT_EQ(Compact(12), "12");
  EXPECT_EQ(Compact(950), "950");
  EXPECT_EQ(Compact(12345), "12.3k");
  EXPECT_EQ(Compact(999999), "1M");
  EXPECT_EQ(Compact(4560000), "4.56M");
  EXPECT_EQ(Compact(-1500), "-1.5k");
  EXPECT_EQ(Compact(2.5e-5), "2.5e-05");
  EXPECT_EQ(Compact(kNaN), "-");
  EXPECT_EQ(Compact(kInf), "-");
  EXPECT_EQ(Grouped(0), "0");
  EXPECT_EQ(Grouped(999), "999");
  EXPECT_EQ(Grouped(120000), "120,000");
  EXPECT_EQ(Grouped(-1234567), "-1,234,567");
  EXPECT_EQ(Seconds(0.85), "850ms");
  EXPECT_EQ(Seconds(1.254), "1.25s");
  EXPECT_EQ(Seconds(192), "3m12s");
}

TEST(ReportTicksTest, NiceTicksCoverTheRange) {
  Axis a = NiceAxis(1.93, 5.51);
  EXPECT_LE(a.lo, 1.93);
  EXPECT_GE(a.hi, 5.51);
  EXPECT_EQ(a.ticks.front(), a.lo);
  EXPECT_EQ(a.ticks.back(), a.hi);
  EXPECT_GE(a.ticks.size(), 3u);
  EXPECT_LE(a.ticks.size(), 12u);
  for (size_t i = 1; i < a.ticks.size(); ++i) EXPECT_GT(a.ticks[i], a.ticks[i - 1]);
  // 0.1 + 0.2 does not drift off the tick.
  Axis small = NiceAxis(0, 0.3, 3);
  for (double t : small.ticks) EXPECT_NEAR(t / 0.1, std::round(t / 0.1), 1e-9) << t;
}

TEST(ReportTicksTest, OnePointAndNonFiniteRangesStillMakeAnAxis) {
  Axis one = NiceAxis(2.5, 2.5);
  EXPECT_LT(one.lo, 2.5);
  EXPECT_GT(one.hi, 2.5);
  Axis zero = NiceAxis(0, 0);
  EXPECT_LT(zero.lo, zero.hi);
  Axis bad = NiceAxis(kNaN, kInf);
  EXPECT_EQ(bad.lo, 0);
  EXPECT_EQ(bad.hi, 1);
  Axis step = IntegerAxis(1, 1);
  EXPECT_EQ(step.lo, 0);
  EXPECT_EQ(step.hi, 2);
  for (double t : IntegerAxis(1, 100000).ticks) EXPECT_EQ(t, std::floor(t));
  EXPECT_LE(IntegerAxis(1, 100000).ticks.size(), 12u);
}

ChartPoint P(double x, double y, bool gap = false, std::string tip = "") {
  return {x, y, gap, std::move(tip)};
}

std::vector<ChartPoint> Ramp(size_t n) {
  std::vector<ChartPoint> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(P(static_cast<double>(i), std::sin(static_cast<double>(i) * 0.01)));
  return out;
}

TEST(ReportDownsampleTest, BoundedAndKeepsExtremesAndTheLastPoint) {
  std::vector<ChartPoint> points = Ramp(100000);
  points[54321].y = 50;   // a spike
  points[77777].y = -50;  // a dip
  for (size_t max : {3u, 10u, 2000u}) {
    std::vector<ChartPoint> out = Downsample(points, max);
    EXPECT_LE(out.size(), max);
    EXPECT_EQ(out.back().x, 99999);
    bool spike = false, dip = false;
    for (size_t i = 0; i < out.size(); ++i) {
      spike = spike || out[i].y == 50;
      dip = dip || out[i].y == -50;
      if (i > 0) {
        EXPECT_GT(out[i].x, out[i - 1].x);
      }
    }
    EXPECT_TRUE(spike && dip) << max;
  }
  EXPECT_EQ(Downsample(Ramp(5), 2000).size(), 5u);
  EXPECT_TRUE(Downsample({}, 2000).empty());
}

TEST(ReportDownsampleTest, GapsSurviveDroppedPointsAndNonFiniteOnes) {
  std::vector<ChartPoint> points = Ramp(10000);
  points[5001].gap_before = true;  // a new launch, likely not a kept point
  int gaps = 0;
  for (const auto& p : Downsample(points, 300)) gaps += p.gap_before;
  EXPECT_EQ(gaps, 1);

  std::vector<ChartPoint> odd = {P(1, 2), P(2, kNaN, true), P(3, kInf), P(4, 3), P(kNaN, 1)};
  std::vector<ChartPoint> finite = FiniteOnly(odd);
  ASSERT_EQ(finite.size(), 2u);
  EXPECT_EQ(finite[1].x, 4);
  EXPECT_TRUE(finite[1].gap_before);
}

TEST(ReportDownsampleTest, GroupMaxKeepsTheSlowest) {
  std::vector<double> v(5000, 1.0);
  v[4321] = 9;
  Groups g = GroupMax(v, 2000);
  EXPECT_LE(g.max.size(), 2000u);
  EXPECT_EQ(g.size, 3u);
  EXPECT_EQ(g.max[4321 / 3], 9);
  EXPECT_EQ(g.first[1], 3u);
  EXPECT_EQ(GroupMax({1, 2}, 2000).size, 1u);
}

LineChart OneSeries(std::vector<ChartPoint> points) {
  LineChart c;
  c.id = "chart-t";
  c.title = "t";
  c.x_label = "step";
  c.y_label = "loss";
  c.series.push_back({"loss", "#123456", "loss", std::move(points), {}});
  c.empty_text = "no steps recorded";
  return c;
}

TEST(ReportChartTest, EmptyChartSaysSo) {
  std::string out = RenderLineChart(OneSeries({}));
  EXPECT_EQ(out, "<p class=\"empty\">no steps recorded</p>\n");
  EXPECT_EQ(RenderLineChart(OneSeries({P(1, kNaN), P(2, kInf)})),
            "<p class=\"empty\">no steps recorded</p>\n");
}

TEST(ReportChartTest, OnePointIsDrawnAsADot) {
  std::string out = RenderLineChart(OneSeries({P(1, 2.5, false, "step 1")}));
  EXPECT_EQ(NestingProblem(out), "");
  EXPECT_EQ(PathPoints(PathData(out, "loss")), 1u);
  EXPECT_EQ(Count(out, "<circle"), 1u);
  EXPECT_NE(out.find("<title>step 1</title>"), std::string::npos);
  EXPECT_EQ(out.find("nan"), std::string::npos);
  EXPECT_EQ(out.find("inf"), std::string::npos);
}

TEST(ReportChartTest, NonFinitePointsAreSkippedAndGapsSplitTheLine) {
  std::string out = RenderLineChart(
      OneSeries({P(1, 3), P(2, kNaN), P(3, 2), P(4, kInf), P(5, 1.5, true), P(6, 1.2)}));
  std::string d = PathData(out, "loss");
  EXPECT_EQ(PathPoints(d), 4u);
  EXPECT_EQ(Count(d, "M"), 2u);  // the gap before step 5
  EXPECT_EQ(out.find("nan"), std::string::npos);
  EXPECT_EQ(out.find("inf"), std::string::npos);
  EXPECT_NE(out.find(">step</text>"), std::string::npos);
  EXPECT_NE(out.find(">loss</text>"), std::string::npos);
}

TEST(ReportChartTest, ManyPointsAreBoundedAndHaveNoDots) {
  std::string out = RenderLineChart(OneSeries(Ramp(100000)));
  EXPECT_LE(PathPoints(PathData(out, "loss")), kMaxChartPoints);
  EXPECT_EQ(Count(out, "<circle"), 0u);
  EXPECT_EQ(NestingProblem(out), "");
}

TEST(ReportChartTest, TextIsEscapedEverywhere) {
  LineChart c = OneSeries({P(1, 1, false, "<b>tip</b>"), P(2, 2)});
  c.id = "x\"y";
  c.y_label = "a<b";
  c.series.push_back({"<i>n</i>", "red\" onload=\"x", "c", {P(1, 1), P(2, 3)}, {}});
  c.marks.push_back({1, "<script>", "#888"});
  std::string out = RenderLineChart(c);
  EXPECT_EQ(NestingProblem(out), "");
  EXPECT_EQ(out.find("<b>"), std::string::npos);
  EXPECT_EQ(out.find("<i>"), std::string::npos);
  EXPECT_EQ(out.find("<script"), std::string::npos);
  EXPECT_EQ(out.find("onload=\""), std::string::npos);
  EXPECT_NE(out.find("&lt;script&gt;"), std::string::npos);
}

TEST(ReportChartTest, BarsWithThresholds) {
  BarChart c;
  c.id = "chart-gate";
  c.title = "gate";
  c.x_label = "node/socket";
  c.y_label = "GiB";
  c.groups = {{"free", "#0a0"}, {"unattributed", "#a00"}};
  c.bars = {{"node1/0", {110, 3}, "node1"}, {"node2/0", {72.7, kNaN}, "node2 <short>"}};
  c.lines = {{100, "min free 100 GiB", "#0a0"}, {24, "max unattributed 24 GiB", "#a00"}};
  std::string out = RenderBarChart(c);
  EXPECT_EQ(NestingProblem(out), "");
  EXPECT_EQ(Count(out, "<rect x="), 3u + 4u);  // three bars and four legend swatches
  EXPECT_EQ(Count(out, "<line class=\"threshold\""), 2u);
  EXPECT_NE(out.find("node2 &lt;short&gt;"), std::string::npos);
  EXPECT_EQ(RenderBarChart(BarChart{}), "<p class=\"empty\">no data</p>\n");
  EXPECT_EQ(Count(out, "<line class=\"need\""), 0u);

  // A mark per bar where it has its own threshold, named once in the legend,
  // and in the axis's range even above every bar.
  c.need = {"min free + its ranks' host memory", "#050"};
  c.bars[0].need = 500;
  std::string marked = RenderBarChart(c);
  EXPECT_EQ(NestingProblem(marked), "");
  EXPECT_EQ(Count(marked, "<line class=\"need\""), 1u);
  EXPECT_EQ(Count(marked, "<rect x="), 3u + 5u);
  EXPECT_NE(marked.find("min free + its ranks&#39; host memory"), std::string::npos);
  EXPECT_NE(marked.find(">500<"), std::string::npos) << "the y axis reaches the mark";
}

}  // namespace
}  // namespace trellis::cli::report
