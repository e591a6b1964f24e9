#include "controller/shell/grpc_serving.h"

#include <unistd.h>

namespace trellis::controller {
namespace {

// A unary request's largest message: a gate report with many sockets, a spec.
constexpr int kMaxReceiveBytes = 4 << 20;

}  // namespace

std::string ThisHostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

absl::StatusOr<GrpcServing> ServeGrpc(const std::string& listen, const TcpSecurity& security,
                                      const std::string& socket_path,
                                      const std::vector<grpc::Service*>& services) {
  GrpcServing serving;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, security.credentials, &serving.port);
  builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
  for (grpc::Service* service : services) builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(kMaxReceiveBytes);
  // A port is one controller's: with gRPC's default SO_REUSEPORT a second
  // controller (another state directory, or a port 0 the kernel handed out
  // twice) bound it too and the kernel split the connections between them.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // The workers ping every 30 s to find a vanished controller host
  // (worker/rpc/controller_link.cc); gRPC's default refuses pings closer
  // than 5 min and would close their connections.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  serving.server = builder.BuildAndStart();
  if (!serving.server || serving.port == 0)
    return absl::UnavailableError(
        "--listen " + listen + ": cannot bind" +
        (security.tls ? " (or the TLS pair is unusable: does --tls-key belong to --tls-cert?)"
                      : ""));
  return serving;
}

std::string DefaultAdvertiseAddress(const std::string& listen, int port) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host == "0.0.0.0" || host == "[::]" || host.empty()) host = ThisHostName();
  return host + ":" + std::to_string(port);
}

}  // namespace trellis::controller
