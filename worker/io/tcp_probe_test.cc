#include "worker/io/tcp_probe.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace trellis::worker {
namespace {

using namespace std::chrono_literals;

// A loopback TCP socket bound to a free port; listening or not.
int BoundSocket(bool listen, int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  if (listen) EXPECT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  *port = ntohs(addr.sin_port);
  return fd;
}

TEST(TcpProbeTest, ListenerIsReached) {
  int port = 0;
  int fd = BoundSocket(true, &port);
  EXPECT_TRUE(TcpConnect("127.0.0.1:" + std::to_string(port), 2000ms).ok());
  EXPECT_TRUE(TcpConnect("localhost:" + std::to_string(port), 2000ms).ok());
  ::close(fd);
}

TEST(TcpProbeTest, NobodyListeningFailsNamingTheAddress) {
  int port = 0;
  int fd = BoundSocket(false, &port);  // held, so nobody else listens on it meanwhile
  const std::string address = "127.0.0.1:" + std::to_string(port);
  absl::Status st = TcpConnect(address, 2000ms);
  ::close(fd);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "cannot connect to " + address + ": Connection refused");
  EXPECT_FALSE(TcpConnect("no-such-host.invalid:80", 2000ms).ok());
  EXPECT_FALSE(TcpConnect("nocolon", 2000ms).ok());
}

}  // namespace
}  // namespace trellis::worker
