#include "worker/io/tcp_probe.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace trellis::worker {
namespace {

using TcpDeadline = std::chrono::steady_clock::time_point;

// errno of a non-blocking connect to one address, 0 when it was accepted.
int ConnectOne(const addrinfo& ai, TcpDeadline deadline) {
  int fd = ::socket(ai.ai_family, ai.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai.ai_protocol);
  if (fd < 0) return errno;
  int err = ::connect(fd, ai.ai_addr, ai.ai_addrlen) == 0 ? 0 : errno;
  while (err == EINPROGRESS) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      err = ETIMEDOUT;
      break;
    }
    pollfd p{fd, POLLOUT, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    if (n == 0) continue;  // the deadline check above ends it
    socklen_t len = sizeof(err);
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  }
  ::close(fd);
  return err;
}

}  // namespace

absl::Status TcpConnect(const std::string& host_port, std::chrono::milliseconds limit) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos)
    return absl::InvalidArgumentError("not HOST:PORT: '" + host_port + "'");
  std::string host = host_port.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string port = host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", ::gai_strerror(rc)));
  const TcpDeadline deadline = std::chrono::steady_clock::now() + limit;
  int err = ENOENT;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    err = ConnectOne(*ai, deadline);
    if (err == 0) break;
  }
  ::freeaddrinfo(found);
  if (err == 0) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("cannot connect to ", host_port, ": ", std::strerror(err)));
}

}  // namespace trellis::worker
