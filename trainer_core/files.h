#pragma once
// The few file-system operations trainer_core needs, on POSIX calls.
// std::filesystem is avoided in everything that links LibTorch: the 2.x pip
// wheels export their own (older) copies of its symbols, which take over the
// program's and crash it. Torch-free.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trellis::train {

std::string JoinPath(const std::string& dir, const std::string& name);
std::string DirName(const std::string& path);
bool IsDirectory(const std::string& path);
bool IsRegularFile(const std::string& path);
bool PathExists(const std::string& path);
int64_t FileSize(const std::string& path);  // -1 when absent

// Names in `dir` (not "." or ".."), sorted; empty when `dir` cannot be read.
std::vector<std::string> ListDir(const std::string& dir);
// Regular files under `dir`, recursively, sorted by path.
std::vector<std::string> ListFilesRecursive(const std::string& dir);

// The whole file at `path`, read through one descriptor whose own path
// (/proc/self/fd: every link resolved as the kernel did when it opened the
// file) must lie under one of `roots` (each resolved too; empty: no check).
// What was checked is what is read: a link swapped between an earlier check
// and this open cannot lead out of the roots. Throws RefusedInput when the
// file lies outside them, TrainError when it cannot be read; messages start
// with `what` and the path.
std::string ReadFileUnderRoots(const std::string& path, const std::vector<std::string>& roots,
                               const std::string& what);

// A file mapped read-only, opened and checked as ReadFileUnderRoots does. Its
// pages are the page cache's: every process of the node that maps the file
// shares one copy, read from disk as touched and reclaimable under memory
// pressure, where a read copy is private to each process for its lifetime.
// The file must not shrink while mapped (a read past its new end is SIGBUS):
// replace it by writing a new file and renaming it into place.
class MappedFile {
 public:
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
  const char* data() const { return data_; }  // nullptr for an empty file
  size_t size() const { return size_; }
  // Advice for the kernel's read-ahead: one pass from start to end (true), or
  // its default, for reads here and there (false).
  void ReadInOrder(bool in_order) const;

 private:
  friend std::shared_ptr<const MappedFile> MapFileUnderRoots(const std::string&,
                                                             const std::vector<std::string>&,
                                                             const std::string&);
  MappedFile(const char* data, size_t size) : data_(data), size_(size) {}
  const char* data_;
  size_t size_;
};
std::shared_ptr<const MappedFile> MapFileUnderRoots(const std::string& path,
                                                    const std::vector<std::string>& roots,
                                                    const std::string& what);

// Throw TrainError naming the path on failure.
void MakeDirs(const std::string& path);
void RenamePath(const std::string& from, const std::string& to);
void RemoveTree(const std::string& path);  // absent is fine
// Creates a fresh directory under $TMPDIR (or /tmp) named prefix-XXXXXX.
std::string MakeTempDir(const std::string& prefix);

// This machine's name (gethostname); "unknown" where it cannot be read.
std::string HostName();

}  // namespace trellis::train
