#include "worker/io/log_tail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/status.h"

namespace trellis::worker {

absl::StatusOr<std::string> ReadFileTail(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open " + path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    absl::Status err = ErrnoStatus("cannot stat " + path);
    ::close(fd);
    return err;
  }
  const off_t size = st.st_size;
  off_t offset = size > static_cast<off_t>(max_bytes) ? size - static_cast<off_t>(max_bytes) : 0;
  std::string out(static_cast<size_t>(size - offset), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(fd, out.data() + got, out.size() - got, offset + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status err = ErrnoStatus("cannot read " + path);
      ::close(fd);
      return err;
    }
    if (n == 0) break;  // truncated meanwhile
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

}  // namespace trellis::worker
