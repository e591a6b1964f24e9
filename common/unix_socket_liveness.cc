#include "common/unix_socket_liveness.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace trellis {

UnixSocketState ProbeUnixSocket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return UnixSocketState::kAbsent;
  if (!S_ISSOCK(st.st_mode)) return UnixSocketState::kNotASocket;
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return UnixSocketState::kNotASocket;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return UnixSocketState::kServed;  // cannot tell: never remove it
  // EAGAIN: its backlog is full, so someone is serving it.
  const bool live =
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 || errno == EAGAIN;
  ::close(fd);
  return live ? UnixSocketState::kServed : UnixSocketState::kStale;
}

}  // namespace trellis
