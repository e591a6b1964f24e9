#pragma once
// A bare TCP connect to HOST:PORT. `trellis-worker check` uses it after a
// gRPC channel failed to come up, to tell "nothing answers there" (a
// firewall, a loopback-only listener) from "something answers but the
// handshake failed" (TLS, or another program on the port).

#include <chrono>
#include <string>

#include "absl/status/status.h"

namespace trellis::worker {

// OK once a connection to any of the host's addresses is accepted within
// `limit` (then closed); else the last address's error, naming the address.
absl::Status TcpConnect(const std::string& host_port, std::chrono::milliseconds limit);

}  // namespace trellis::worker
