#include "controller/shell/grpc_serving.h"

#include <unistd.h>

namespace trellis::controller {
namespace {

// A unary request's largest message: a gate report with many sockets, a spec.
constexpr int kMaxReceiveBytes = 4 << 20;

std::string HostName() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

}  // namespace

absl::StatusOr<GrpcServing> ServeGrpc(const std::string& listen, const TcpSecurity& security,
                                      const std::string& socket_path,
                                      const std::vector<grpc::Service*>& services) {
  GrpcServing serving;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, security.credentials, &serving.port);
  builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
  for (grpc::Service* service : services) builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(kMaxReceiveBytes);
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
  if (host == "0.0.0.0" || host == "[::]" || host.empty()) host = HostName();
  return host + ":" + std::to_string(port);
}

}  // namespace trellis::controller
