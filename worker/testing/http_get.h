#pragma once
// Test helper: one HTTP/1.0 GET over a plain TCP socket, bounded in time.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace trellis::worker::testing {

struct HttpResponse {
  std::string error;  // empty when a response came back
  std::string status_line;
  std::string body;
};

inline HttpResponse HttpGet(const std::string& ipv4, int port, const std::string& path) {
  HttpResponse r;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {std::string("socket: ") + std::strerror(errno), "", ""};
  timeval limit{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, ipv4.c_str(), &addr.sin_addr);
  std::string raw;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    r.error = "connect " + ipv4 + ":" + std::to_string(port) + ": " + std::strerror(errno);
  } else {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + ipv4 + "\r\n\r\n";
    if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size()))
      r.error = std::string("write: ") + std::strerror(errno);
    char buf[8192];
    for (ssize_t n; r.error.empty() && (n = ::read(fd, buf, sizeof(buf))) != 0;) {
      if (n < 0) r.error = std::string("read: ") + std::strerror(errno);
      if (n > 0) raw.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  if (!r.error.empty()) return r;
  size_t line_end = raw.find("\r\n");
  size_t head_end = raw.find("\r\n\r\n");
  if (line_end == std::string::npos || head_end == std::string::npos)
    return {"no HTTP response: " + raw, "", ""};
  r.status_line = raw.substr(0, line_end);
  r.body = raw.substr(head_end + 4);
  return r;
}

}  // namespace trellis::worker::testing
