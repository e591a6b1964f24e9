#pragma once
// When a rank's output was written. A rank writes its log itself (the worker
// hands it the file, so the output survives the worker); the worker notes,
// about once a second while a log grows and once when its rank ends, how many
// bytes it had: "<unix ms> <bytes>\n" lines appended to <log>.times. Bytes
// between two notes were written between their times, so a line's time is
// that of the first note at or past its end (up to a second late), and
// `trellis logs --since` starts at the note before the first one at or past
// the time asked. A log without notes (written before they were, or Slurm's
// batch script output) has the file's modification time for its end only.
// Pure and torch-free.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trellis {

struct LogTimeNote {
  int64_t unix_ms = 0;
  uint64_t bytes = 0;
};

// "<log>.times".
std::string LogTimesPath(const std::string& log_path);

// "<unix ms> <bytes>\n".
std::string FormatLogTimeNote(const LogTimeNote& note);

// The notes of a .times file's text, in order; a line that does not parse
// (a note cut short by a crash) and one that goes back in bytes are skipped.
// `*consumed` (when given): the bytes of whole lines read, where the next
// read of a growing file starts.
std::vector<LogTimeNote> ParseLogTimeNotes(std::string_view text, size_t* consumed = nullptr);

// The byte offset from which the log's lines were written at or after
// `since_ms`: the bytes of the note before the first note at or past it (0
// when that is the first); with no note at or past it, the last note's bytes
// (what came after was written after it).
uint64_t LogOffsetSince(const std::vector<LogTimeNote>& notes, int64_t since_ms);

// When the byte before `end_offset` was written: the time of the first note
// at or past it; -1 when no note is (written since the last note).
int64_t LogTimeOf(const std::vector<LogTimeNote>& notes, uint64_t end_offset);

// "2026-12-07T16:51:37.123Z" (UTC, milliseconds).
std::string FormatUtcMillis(int64_t unix_ms);

}  // namespace trellis
