#include "common/metrics_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace trellis {
namespace {

// One HTTP/1.0 GET of http://127.0.0.1:PORT/metrics: the whole response, or "" on an error.
std::string GetMetrics(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval limit{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) response.append(buf, n);
    }
  }
  ::close(fd);
  return response;
}

// A listening socket on a free loopback port, and its address.
struct Taken {
  int fd = -1;
  std::string address;
};
Taken TakeAPort() {
  Taken t;
  t.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (::bind(t.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(t.fd, 1) != 0)
    return t;
  socklen_t len = sizeof(addr);
  ::getsockname(t.fd, reinterpret_cast<sockaddr*>(&addr), &len);
  t.address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  return t;
}

TEST(MetricsServerTest, ServesWhatItIsGivenFromWhenItIsGiven) {
  auto server = MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter()
      .Name("trellis_test_things_total")
      .Help("things")
      .Register(*registry)
      .Add({{"kind", "a"}})
      .Increment(3);

  std::string before = GetMetrics((*server)->port());
  EXPECT_NE(before.find(" 404 "), std::string::npos) << "bound, nothing to serve yet: " << before;
  (*server)->Serve(registry);
  std::string after = GetMetrics((*server)->port());
  EXPECT_NE(after.find(" 200 "), std::string::npos) << after;
  EXPECT_NE(after.find("trellis_test_things_total{kind=\"a\"} 3"), std::string::npos) << after;
}

TEST(MetricsServerTest, RefusesAnAddressInUseOrInvalidNamingIt) {
  Taken taken = TakeAPort();
  ASSERT_FALSE(taken.address.empty());
  auto server = MetricsServer::Start(taken.address);
  ::close(taken.fd);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnavailable) << server.status();
  EXPECT_NE(server.status().message().find("cannot serve metrics on " + taken.address),
            std::string::npos)
      << server.status();

  for (const std::string bad : {"nonsense", "127.0.0.1:70000", "127.0.0.1", ":9152"}) {
    auto refused = MetricsServer::Start(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find(bad), std::string::npos) << refused.status();
  }
}

TEST(MetricsServerTest, StopsWithoutWaitingForItsListenerToWake) {
  auto server = MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const auto start = std::chrono::steady_clock::now();
  server->reset();
  // The listener wakes by itself every 2 s; the knock makes it see the stop at once.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
  EXPECT_EQ(GetMetrics(port), "") << "still serving after it was stopped";
}

}  // namespace
}  // namespace trellis
