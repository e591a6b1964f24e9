#include "worker/core/line_splitter.h"

#include <gtest/gtest.h>

namespace trellis::worker {
namespace {

std::vector<std::string> Render(const std::vector<LineEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.kind == LineEvent::kLine ? e.text : "<oversized>");
  return out;
}

using Lines = std::vector<std::string>;

TEST(LineSplitterTest, CompleteLines) {
  LineSplitter s(16);
  EXPECT_EQ(Render(s.Feed("a\nbb\n\nccc\r\n")), (Lines{"a", "bb", "ccc"}));
  EXPECT_EQ(s.buffered(), 0u);
}

TEST(LineSplitterTest, PartialWritesJoin) {
  LineSplitter s(16);
  EXPECT_EQ(Render(s.Feed("ab")), Lines{});
  EXPECT_EQ(Render(s.Feed("c")), Lines{});
  EXPECT_EQ(Render(s.Feed("d\ne")), (Lines{"abcd"}));
  EXPECT_EQ(Render(s.Finish()), (Lines{"e"}));
}

TEST(LineSplitterTest, ExactlyTheBoundIsKept) {
  LineSplitter s(4);
  EXPECT_EQ(Render(s.Feed("abcd\nabcd\r\nabcde\n")), (Lines{"abcd", "abcd", "<oversized>"}));
}

TEST(LineSplitterTest, OversizedInOneChunkIsSkippedToNewline) {
  LineSplitter s(4);
  EXPECT_EQ(Render(s.Feed("0123456789\nok\n")), (Lines{"<oversized>", "ok"}));
}

TEST(LineSplitterTest, OversizedAcrossChunksReportedOnceAndNotBuffered) {
  LineSplitter s(4);
  EXPECT_EQ(Render(s.Feed("012")), Lines{});
  EXPECT_EQ(Render(s.Feed("3456")), (Lines{"<oversized>"}));
  EXPECT_EQ(s.buffered(), 0u);
  EXPECT_EQ(Render(s.Feed(std::string(1000, 'x'))), Lines{});
  EXPECT_EQ(s.buffered(), 0u);
  EXPECT_EQ(Render(s.Feed("yyy\nok\n")), (Lines{"ok"}));
}

TEST(LineSplitterTest, UnterminatedOversizedTailIsDroppedAtFinish) {
  LineSplitter s(4);
  s.Feed("0123456789");
  EXPECT_EQ(Render(s.Finish()), Lines{});
}

}  // namespace
}  // namespace trellis::worker
