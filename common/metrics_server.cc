#include "common/metrics_server.h"

#include <arpa/inet.h>
#include <prometheus/exposer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <thread>
#include <vector>

#include "common/host_port.h"

namespace trellis {
namespace {

// Prometheus scrapes one request at a time; a second thread answers a person's
// curl meanwhile.
constexpr size_t kServerThreads = 2;

// The IPv4 address a connection to the server can use: the one it binds, or
// loopback when it binds every interface (or a name or an IPv6 address).
in_addr WakeAddress(const std::string& listen) {
  in_addr addr{};
  const std::string host = listen.substr(0, listen.rfind(':'));
  if (host == "0.0.0.0" || ::inet_pton(AF_INET, host.c_str(), &addr) != 1)
    addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

// Connects and hangs up at once.
void Knock(in_addr addr, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr = addr;
  (void)::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to));  // refused once it is gone
  ::close(fd);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen) {
  if (!IsHostPort(listen, /*min_port=*/0))
    return absl::InvalidArgumentError(
        listen + ": not HOST:PORT (an IP address, a port in [0, 65535]; 0: any free port)");
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(listen, kServerThreads);
  } catch (const std::exception& e) {
    // civetweb's own words ("null context ... binding to port"): ours name the address.
    return absl::UnavailableError("cannot serve metrics on " + listen +
                                  ": the address is in use or not this host's (" + e.what() + ")");
  }
  std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.size() != 1)
    return absl::InternalError("metrics server on " + listen + " listens on " +
                               std::to_string(ports.size()) + " ports, expected 1");
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(std::move(exposer), ports[0], WakeAddress(listen)));
}

MetricsServer::MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, int port, in_addr wake)
    : exposer_(std::move(exposer)), port_(port), wake_(wake) {}

void MetricsServer::Serve(std::weak_ptr<prometheus::Collectable> metrics) {
  exposer_->RegisterCollectable(metrics);
}

MetricsServer::~MetricsServer() {
  // The server's stop waits for its listening thread, which wakes every 2 s
  // or on a connection: knocking until it is gone saves its owner those 2 s
  // at every exit.
  std::atomic<bool> stopped{false};
  std::thread stop([&] {
    exposer_.reset();
    stopped = true;
  });
  while (!stopped) {
    Knock(wake_, port_);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop.join();
}

}  // namespace trellis
