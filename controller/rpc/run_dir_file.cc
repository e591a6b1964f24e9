#include "controller/rpc/run_dir_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace trellis::controller {

absl::StatusOr<std::string> ReadRunDirFile(const std::string& path, int64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(path + ": no such file");
    return absl::FailedPreconditionError(path + ": " + std::strerror(errno) +
                                         (errno == ELOOP ? " (a link: not read)" : ""));
  }
  struct stat st {};
  std::string text;
  absl::Status status;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = absl::FailedPreconditionError(path + ": not a regular file");
  } else if (st.st_size > max_bytes) {
    status = absl::FailedPreconditionError(path + ": " + std::to_string(st.st_size) +
                                           " bytes, at most " + std::to_string(max_bytes) +
                                           " accepted");
  } else {
    text.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < text.size()) {  // a network file system may read it in parts
      ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got != text.size()) status = absl::UnavailableError(path + ": short read");
  }
  ::close(fd);
  if (!status.ok()) return status;
  return text;
}

}  // namespace trellis::controller
