#pragma once
// Serves a registry on http://HOST:PORT/metrics (prometheus-cpp's exposer: a
// small HTTP server on threads of its own, which read the registry while the
// worker's loop updates it; the families are thread-safe).

#include <netinet/in.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace prometheus {
class Collectable;
class Exposer;
}  // namespace prometheus

namespace trellis::worker {

class MetricsServer {
 public:
  // `listen` is HOST:PORT; port 0 takes any free port. The error names the
  // address when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen, std::weak_ptr<prometheus::Collectable> metrics);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, int port, in_addr wake);

  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_;
  in_addr wake_;  // where a connection reaches the server (see the destructor)
};

}  // namespace trellis::worker
