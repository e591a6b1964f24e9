#pragma once
// Serves Prometheus collectables on http://HOST:PORT/metrics: prometheus-cpp's
// exposer, a small HTTP server on threads of its own, which read the
// registries while their owner updates them (prometheus-cpp locks each
// metric). The controller and every worker serve their /metrics with it.

#include <netinet/in.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace prometheus {
class Collectable;
class Exposer;
}  // namespace prometheus

namespace trellis {

class MetricsServer {
 public:
  // Binds `listen`, HOST:PORT (an IP address; port 0: any free port), at
  // once, so that a taken address stops its caller before anything else
  // starts. The error names the address when it is invalid
  // (InvalidArgument) or cannot be bound (Unavailable).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& listen);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Adds `metrics` to what /metrics shows; before the first, /metrics answers 404.
  void Serve(std::weak_ptr<prometheus::Collectable> metrics);
  int port() const { return port_; }

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, int port, in_addr wake);

  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_;
  in_addr wake_;  // where a connection reaches the server (see the destructor)
};

}  // namespace trellis
