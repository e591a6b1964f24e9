#include "common/atomic_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace trellis {
namespace {

// Two writers of one path (threads, or processes sharing the directory) each
// get a temporary file of their own.
std::string TempPathBeside(const std::string& path) {
  static std::atomic<uint64_t> next{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(next++);
}

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path, mode_t mode)
    : path_(std::move(path)), temp_path_(TempPathBeside(path_)) {
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd_ < 0) Fail("cannot create", temp_path_);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

bool AtomicFileWriter::Fail(const std::string& what, const std::string& file) {
  const int err = errno;
  if (error_.empty()) error_ = what + " " + file + ": " + std::strerror(err);
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
    fd_ = -1;
  }
  return false;
}

bool AtomicFileWriter::Write(std::string_view bytes) { return Write(bytes.data(), bytes.size()); }

bool AtomicFileWriter::Write(const void* data, size_t bytes) {
  if (!ok()) return false;
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = ENOSPC;  // write(2) sets no errno when it writes nothing
    if (n <= 0) return Fail("cannot write", temp_path_);
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool AtomicFileWriter::WriteAt(uint64_t offset, const void* data, size_t bytes) {
  if (!ok()) return false;
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = ENOSPC;
    if (n <= 0) return Fail("cannot write", temp_path_);
    p += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool AtomicFileWriter::Commit() {
  if (!ok()) return false;
  if (::fsync(fd_) != 0) return Fail("cannot flush", temp_path_);
  const int fd = fd_;
  fd_ = -1;  // closed below whatever close returns
  bool ok = ::close(fd) == 0;
  if (!ok || ::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_path_.c_str());
    errno = err;
    return ok ? Fail("cannot rename " + temp_path_ + " to", path_)
              : Fail("cannot write", temp_path_);
  }
  // The file is in place: a directory that cannot be fsynced (some file
  // systems refuse it) leaves only the rename's durability to the kernel.
  int dir = ::open(DirectoryOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
  return true;
}

}  // namespace trellis
