#include "common/log_times.h"

#include <gtest/gtest.h>

namespace trellis {
namespace {

TEST(LogTimesTest, NotesRoundTripAndBadLinesAreSkipped) {
  const std::string text = FormatLogTimeNote({1000, 10}) + "garbage\n" +
                           FormatLogTimeNote({2000, 25}) + "3000 20\n" /* back in bytes */ +
                           FormatLogTimeNote({4000, 40}) + "5000 4";  // cut short
  size_t consumed = 0;
  const auto notes = ParseLogTimeNotes(text, &consumed);
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_EQ(notes[1].unix_ms, 2000);
  EXPECT_EQ(notes[1].bytes, 25u);
  EXPECT_EQ(notes[2].bytes, 40u);
  EXPECT_EQ(consumed, text.size() - 6);  // the unfinished note is read next time
  EXPECT_EQ(LogTimesPath("/r/attempt-1/launch-1/rank-3.log"),
            "/r/attempt-1/launch-1/rank-3.log.times");
}

// Bytes (10, 25] were written in (1 s, 2 s], (25, 40] in (2 s, 4 s].
TEST(LogTimesTest, SinceStartsAtTheNoteBeforeTheFirstAtOrPastIt) {
  const std::vector<LogTimeNote> notes{{1000, 10}, {2000, 25}, {4000, 40}};
  EXPECT_EQ(LogOffsetSince(notes, 0), 0u);
  EXPECT_EQ(LogOffsetSince(notes, 1000), 0u);
  EXPECT_EQ(LogOffsetSince(notes, 1001), 10u);
  EXPECT_EQ(LogOffsetSince(notes, 3000), 25u);
  EXPECT_EQ(LogOffsetSince(notes, 9000), 40u);  // only what came after the last note
  EXPECT_EQ(LogOffsetSince({}, 9000), 0u);
}

TEST(LogTimesTest, ALinesTimeIsTheFirstNoteAtOrPastItsEnd) {
  const std::vector<LogTimeNote> notes{{1000, 10}, {2000, 25}, {4000, 40}};
  EXPECT_EQ(LogTimeOf(notes, 1), 1000);
  EXPECT_EQ(LogTimeOf(notes, 10), 1000);
  EXPECT_EQ(LogTimeOf(notes, 11), 2000);
  EXPECT_EQ(LogTimeOf(notes, 40), 4000);
  EXPECT_EQ(LogTimeOf(notes, 41), -1);
  EXPECT_EQ(LogTimeOf({}, 1), -1);
}

TEST(LogTimesTest, UtcWithMilliseconds) {
  EXPECT_EQ(FormatUtcMillis(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatUtcMillis(1796665897123), "2026-12-07T17:51:37.123Z");
}

}  // namespace
}  // namespace trellis
