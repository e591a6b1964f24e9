#pragma once
// The controller's gRPC server: the TCP port (workers, and users with a
// token) and the owner's unix socket, both with every service.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/shell/startup_checks.h"

namespace trellis::controller {

struct GrpcServing {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the bound TCP port (--listen's port 0: any free one)
};

// Binds `listen` (with `security`) and unix:`socket_path`, and serves
// `services` on both. The error names --listen.
absl::StatusOr<GrpcServing> ServeGrpc(const std::string& listen, const TcpSecurity& security,
                                      const std::string& socket_path,
                                      const std::vector<grpc::Service*>& services);

// The host:port workers dial when --advertise is not given: --listen's host
// (this host's name where it listens on every interface) and the bound port.
std::string DefaultAdvertiseAddress(const std::string& listen, int port);

// This host's name (gethostname): the default advertised host, and the
// host the state directory's lease and address file name.
std::string ThisHostName();

}  // namespace trellis::controller
