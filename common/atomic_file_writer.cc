#include "common/atomic_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace trellis {
namespace {

std::string TempPathBeside(const std::string& path, TempName temp_name) {
  if (temp_name == TempName::kDotTmp) return path + ".tmp";
  static std::atomic<uint64_t> next{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(next++);
}

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path, mode_t mode, TempName temp_name)
    : path_(std::move(path)), temp_path_(TempPathBeside(path_, temp_name)) {
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd_ < 0) Fail(temp_path_, "cannot create");
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

bool AtomicFileWriter::Fail(const std::string& file, const std::string& what) {
  const int err = errno;
  if (error_.empty()) error_ = file + ": " + what + ": " + std::strerror(err);
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
    fd_ = -1;
  }
  buffer_ = {};
  return false;
}

bool AtomicFileWriter::Write(std::string_view bytes) { return Write(bytes.data(), bytes.size()); }

bool AtomicFileWriter::Write(const void* data, size_t bytes) {
  if (!ok()) return false;
  const char* p = static_cast<const char*>(data);
  if (buffer_.size() + bytes > kBufferBytes) {
    if (!FlushBuffer()) return false;
    if (bytes >= kBufferBytes) {  // a copy would only cost time
      if (!WriteThrough(p, bytes)) return false;
      pos_ += bytes;
      end_ = std::max(end_, pos_);
      return true;
    }
  }
  buffer_.insert(buffer_.end(), p, p + bytes);
  pos_ += bytes;
  end_ = std::max(end_, pos_);
  return true;
}

bool AtomicFileWriter::WriteThrough(const char* p, size_t bytes) {
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = ENOSPC;  // write(2) sets no errno when it writes nothing
    if (n <= 0) return Fail(temp_path_, "cannot write");
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool AtomicFileWriter::FlushBuffer() {
  if (buffer_.empty()) return true;
  if (!WriteThrough(buffer_.data(), buffer_.size())) return false;
  buffer_.clear();
  return true;
}

bool AtomicFileWriter::WriteAt(uint64_t offset, const void* data, size_t bytes) {
  // The range may hold bytes still in the buffer: they go first.
  if (!ok() || !FlushBuffer()) return false;
  const char* p = static_cast<const char*>(data);
  end_ = std::max(end_, offset + bytes);
  while (bytes > 0) {
    ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = ENOSPC;
    if (n <= 0) return Fail(temp_path_, "cannot write");
    p += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool AtomicFileWriter::Commit() {
  if (!ok() || !FlushBuffer()) return false;
  buffer_ = {};
  if (::fsync(fd_) != 0) return Fail(temp_path_, "cannot fsync");
  const int fd = fd_;
  fd_ = -1;  // closed below whatever close returns
  bool ok = ::close(fd) == 0;
  if (!ok || ::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_path_.c_str());
    errno = err;
    return ok ? Fail(temp_path_, "cannot rename to " + path_) : Fail(temp_path_, "cannot write");
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
