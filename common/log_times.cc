#include "common/log_times.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace trellis {

std::string LogTimesPath(const std::string& log_path) { return log_path + ".times"; }

std::string FormatLogTimeNote(const LogTimeNote& note) {
  return std::to_string(note.unix_ms) + " " + std::to_string(note.bytes) + "\n";
}

std::vector<LogTimeNote> ParseLogTimeNotes(std::string_view text, size_t* consumed) {
  std::vector<LogTimeNote> notes;
  size_t at = 0;
  for (size_t nl = text.find('\n'); nl != std::string_view::npos; nl = text.find('\n', at)) {
    const std::string line(text.substr(at, nl - at));
    at = nl + 1;
    long long ms = 0;
    unsigned long long bytes = 0;
    char extra = 0;
    if (std::sscanf(line.c_str(), "%lld %llu%c", &ms, &bytes, &extra) != 2 || ms < 0) continue;
    if (!notes.empty() && bytes < notes.back().bytes) continue;
    notes.push_back({static_cast<int64_t>(ms), static_cast<uint64_t>(bytes)});
  }
  if (consumed) *consumed = at;
  return notes;
}

uint64_t LogOffsetSince(const std::vector<LogTimeNote>& notes, int64_t since_ms) {
  auto first = std::find_if(notes.begin(), notes.end(),
                            [&](const LogTimeNote& n) { return n.unix_ms >= since_ms; });
  if (first == notes.end()) return notes.empty() ? 0 : notes.back().bytes;
  return first == notes.begin() ? 0 : std::prev(first)->bytes;
}

int64_t LogTimeOf(const std::vector<LogTimeNote>& notes, uint64_t end_offset) {
  auto it = std::lower_bound(notes.begin(), notes.end(), end_offset,
                             [](const LogTimeNote& n, uint64_t b) { return n.bytes < b; });
  return it == notes.end() ? -1 : it->unix_ms;
}

std::string FormatUtcMillis(int64_t unix_ms) {
  const std::time_t s = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char text[80];  // room for any int the compiler can imagine
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(unix_ms % 1000));
  return text;
}

}  // namespace trellis
