#include "worker/io/log_times_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log_times.h"

namespace trellis::worker {

void LogTimesWriter::Add(const std::string& log_path) { noted_.emplace(log_path, 0); }

void LogTimesWriter::NoteAll(int64_t unix_ms) {
  for (const auto& [path, bytes] : noted_) Note(path, unix_ms);
}

void LogTimesWriter::Note(const std::string& log_path, int64_t unix_ms) {
  auto it = noted_.find(log_path);
  struct stat st;
  if (it == noted_.end() || ::stat(log_path.c_str(), &st) != 0) return;
  const auto bytes = static_cast<uint64_t>(st.st_size);
  if (bytes <= it->second) return;
  const std::string line = FormatLogTimeNote({unix_ms, bytes});
  const int fd = ::open(LogTimesPath(log_path).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                        0644);
  if (fd < 0) return;
  if (::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()))
    it->second = bytes;
  ::close(fd);
}

}  // namespace trellis::worker
