#pragma once
// Writes a file so that a reader sees the old one or the whole new one, never a
// part: the bytes go to a temporary file beside `path` (the same directory, so
// the same file system), which is fsynced and renamed over `path`; the
// directory is fsynced after, so that the rename outlives a power loss. A
// writer that fails or is not committed removes its temporary file and leaves
// `path` as it was.
//
// No absl and no exceptions here: trainer_core (which throws its own) uses it
// as well as the controller, worker and CLI. Whole strings with an
// absl::Status: common/atomic_file.h.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace trellis {

class AtomicFileWriter {
 public:
  // Creates the temporary file `path`.tmp.<pid>.<n> with `mode` (less the
  // umask, as open(2) does); ok() says whether it could.
  explicit AtomicFileWriter(std::string path, mode_t mode = 0644);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Each returns false, and does nothing, once anything has failed; error()
  // says what failed, naming the file and errno's text.
  bool Write(std::string_view bytes);
  bool Write(const void* data, size_t bytes);
  // Overwrites bytes already written, e.g. a header completed at the end.
  bool WriteAt(uint64_t offset, const void* data, size_t bytes);
  // Flushes the file to disk and renames it over `path`.
  bool Commit();

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  // Records "`what` `file`: <errno's text>" (saving errno first), closes and
  // removes the temporary file; returns false.
  bool Fail(const std::string& what, const std::string& file);

  std::string path_;
  std::string temp_path_;
  std::string error_;
  int fd_ = -1;
};

}  // namespace trellis
