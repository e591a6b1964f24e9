#pragma once
// Notes, in <log>.times beside each rank log, how many bytes it had when
// (common/log_times.h): on each Note for every log that grew since its last
// note, and once more when its rank ends. Appends one short line per note; a
// note that cannot be written is skipped (logs stay whole without times).

#include <cstdint>
#include <map>
#include <string>

namespace trellis::worker {

class LogTimesWriter {
 public:
  void Add(const std::string& log_path);
  // Every log that grew since its last note.
  void NoteAll(int64_t unix_ms);
  // One log, if it grew.
  void Note(const std::string& log_path, int64_t unix_ms);

 private:
  std::map<std::string, uint64_t> noted_;  // log -> its bytes at its last note
};

}  // namespace trellis::worker
