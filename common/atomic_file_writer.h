#pragma once
// Writes a file so that a reader sees the old one or the whole new one, never a
// part: the bytes go to a temporary file beside `path` (the same directory, so
// the same file system), which is fsynced and renamed over `path`; the
// directory is fsynced after, so that the rename outlives a power loss. A
// writer that fails or is not committed removes its temporary file and leaves
// `path` as it was.
//
// It streams: Write takes a file of any size in pieces of any size, small
// pieces gathered in a buffer of its own (kBufferBytes), large ones written
// straight through, so that neither many small writes nor a file of many
// gigabytes (a checkpoint shard, an export) costs much.
//
// No absl and no exceptions here: trainer_core (which throws its own) uses it
// as well as the controller, worker and CLI. Whole strings with an
// absl::Status: common/atomic_file.h.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trellis {

// The temporary file's name.
enum class TempName {
  // `path`.tmp.<pid>.<n>: writers of one path (threads, processes sharing the
  // directory) never meet.
  kUnique,
  // `path`.tmp: for a path only one writer writes at a time (a rank's shard);
  // the leftover of a writer killed mid-write is the next one's to overwrite,
  // not a new name per attempt.
  kDotTmp,
};

class AtomicFileWriter {
 public:
  // Pieces smaller than this are gathered before they are written.
  static constexpr size_t kBufferBytes = size_t{1} << 20;

  // Creates the temporary file with `mode` (less the umask, as open(2) does);
  // ok() says whether it could.
  explicit AtomicFileWriter(std::string path, mode_t mode = 0644,
                            TempName temp_name = TempName::kUnique);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Each returns false, and does nothing, once anything has failed; error()
  // says what failed: "<file>: <what>: <errno's text>".
  // Appends; the bytes may wait in the buffer until a later call.
  bool Write(std::string_view bytes);
  bool Write(const void* data, size_t bytes);
  // Overwrites bytes already written (or extends the file), e.g. a header
  // completed at the end.
  bool WriteAt(uint64_t offset, const void* data, size_t bytes);
  // Writes what is buffered, flushes the file to disk and renames it over
  // `path`.
  bool Commit();

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  // The file's length so far, buffered bytes included.
  uint64_t bytes_written() const { return end_; }

 private:
  // Writes `bytes` at the file's offset, all of them or fails.
  bool WriteThrough(const char* data, size_t bytes);
  bool FlushBuffer();
  // Records "`file`: `what`: <errno's text>" (saving errno first), closes and
  // removes the temporary file; returns false.
  bool Fail(const std::string& file, const std::string& what);

  std::string path_;
  std::string temp_path_;
  std::string error_;
  int fd_ = -1;
  std::vector<char> buffer_;  // appended bytes not yet written, after the file's offset
  uint64_t pos_ = 0;          // where the next Write goes (buffered bytes included)
  uint64_t end_ = 0;
};

}  // namespace trellis
