#include "trainer_core/profile/timeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace trellis::train {
namespace {

DeviceSpan Span(uint64_t start, uint64_t end, int64_t stream, std::string name) {
  return {start, end, stream, std::move(name)};
}

TEST(TimelineTest, NoSpansIsAnEmptyTimeline) {
  Timeline t = AnalyzeTimeline({}, 10);
  EXPECT_EQ(t.span_ns, 0u);
  EXPECT_EQ(t.busy_ns, 0u);
  EXPECT_TRUE(t.gaps.empty());
}

TEST(TimelineTest, OverlappingStreamsCountOnceAndGapsNameTheirNeighbours) {
  // stream 7: a [0,100) b [130,200) c [500,600); stream 9: w [50,160) x [400,450)
  Timeline t =
      AnalyzeTimeline({Span(0, 100, 7, "a"), Span(130, 200, 7, "b"), Span(500, 600, 7, "c"),
                       Span(50, 160, 9, "w"), Span(400, 450, 9, "x")},
                      100);
  EXPECT_EQ(t.span_ns, 600u);
  EXPECT_EQ(t.busy_ns, 200u + 50u + 100u);  // [0,200) [400,450) [500,600)
  EXPECT_EQ(t.main_stream, 7);
  EXPECT_EQ(t.main_stream_busy_ns, 270u);
  EXPECT_EQ(t.small_gaps, 1);  // 450 -> 500
  EXPECT_EQ(t.small_gaps_ns, 50u);
  ASSERT_EQ(t.gaps.size(), 1u);  // 200 -> 400, after b (w ended earlier)
  EXPECT_EQ(t.gaps[0].before, "b");
  EXPECT_EQ(t.gaps[0].after, "x");
  EXPECT_EQ(t.gaps[0].idle_ns, 200u);
  EXPECT_EQ(t.gaps[0].count, 1);
}

TEST(TimelineTest, GapsBetweenTheSameKernelsAreSummedLargestFirst) {
  std::vector<DeviceSpan> spans;
  for (int step = 0; step < 3; ++step) {
    const uint64_t base = step * 10'000;
    spans.push_back(Span(base, base + 1000, 1, "void optimizer_kernel<float>"));
    spans.push_back(Span(base + 4000, base + 5000, 1, "embedding"));  // 3,000 idle before
    spans.push_back(Span(base + 5500, base + 6000, 1, "gemm"));       // 500 idle before
  }
  Timeline t = AnalyzeTimeline(spans, 400);
  ASSERT_EQ(t.gaps.size(), 3u);
  EXPECT_EQ(t.gaps[0].before, "optimizer_kernel<float>");  // "void " dropped
  EXPECT_EQ(t.gaps[0].idle_ns, 9000u);
  EXPECT_EQ(t.gaps[0].count, 3);
  EXPECT_EQ(t.gaps[1].before, "gemm");  // between steps: 6,000 -> 10,000
  EXPECT_EQ(t.gaps[1].idle_ns, 8000u);
  EXPECT_EQ(t.gaps[2].before, "embedding");
  EXPECT_EQ(t.gaps[2].idle_ns, 1500u);
  const std::string text = FormatTimeline(t, 3, 2);
  EXPECT_NE(text.find("mean of 3 steps"), std::string::npos) << text;
  EXPECT_NE(text.find("optimizer_kernel<float>"), std::string::npos) << text;
  EXPECT_EQ(text.find("-> gemm"), std::string::npos) << "only the top 2 groups:\n" << text;
}

// Busy time against a reference that marks every nanosecond, on random spans.
TEST(TimelineTest, BusyTimeMatchesAPerNanosecondCountOnRandomSpans) {
  std::mt19937 rng(std::random_device{}());
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<DeviceSpan> spans;
    std::vector<bool> busy(2000, false);
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const uint64_t a = rng() % 1900, len = rng() % 100;
      spans.push_back(Span(a, a + len, static_cast<int64_t>(rng() % 3), "k" + std::to_string(i)));
      for (uint64_t x = a; x < a + len; ++x) busy[x] = true;
    }
    const uint64_t expect = static_cast<uint64_t>(std::count(busy.begin(), busy.end(), true));
    Timeline t = AnalyzeTimeline(spans, 5);
    EXPECT_EQ(t.busy_ns, expect) << "trial " << trial;
    uint64_t gaps = t.small_gaps_ns;
    for (const IdleGaps& g : t.gaps) gaps += g.idle_ns;
    EXPECT_EQ(t.busy_ns + gaps, t.span_ns) << "trial " << trial;
  }
}

TEST(TimelineTest, MemsetsCountTowardTheSpanAfterThemOnTheirOwnStream) {
  // stream 1: memset memset gemm memset reduce memset(at the end)
  // stream 2: a kernel that starts between them must not take any.
  Timeline t = AnalyzeTimeline(
      {Span(0, 10, 1, "Memset (Device)"), Span(10, 30, 1, "Memset (Device)"),
       Span(40, 100, 1, "void gemm_kernel"), Span(35, 90, 2, "other_stream"),
       Span(110, 115, 1, "Memset (Device)"), Span(120, 130, 1, "reduce"),
       Span(200, 204, 1, "Memset (Device)")},
      1000);
  ASSERT_EQ(t.memsets.size(), 3u);
  EXPECT_EQ(t.memsets[0].next, "gemm_kernel");  // "void " dropped, most memsets first
  EXPECT_EQ(t.memsets[0].count, 2);
  EXPECT_EQ(t.memsets[0].memset_ns, 30u);
  const auto find = [&](const std::string& next) {
    for (const MemsetsBefore& m : t.memsets)
      if (m.next == next) return m;
    return MemsetsBefore{};
  };
  EXPECT_EQ(find("reduce").count, 1);
  EXPECT_EQ(find("reduce").memset_ns, 5u);
  EXPECT_EQ(find("(none)").count, 1);
  EXPECT_EQ(find("other_stream").count, 0);
  const std::string text = FormatTimeline(t, 1, 5);
  EXPECT_NE(text.find("the span after them on their stream"), std::string::npos) << text;
  EXPECT_NE(text.find("gemm_kernel"), std::string::npos) << text;
}

TEST(TimelineTest, ASpanEndingBeforeItStartsIsRefusedByName) {
  try {
    AnalyzeTimeline({Span(10, 20, 0, "fine"), Span(50, 40, 0, "backwards_kernel")}, 1);
    FAIL() << "expected a refusal";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("backwards_kernel"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trellis::train
