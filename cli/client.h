#pragma once
// The CLI's only gRPC edge: the channel to the controller, the context every
// call carries, and how a failed call becomes a message and an exit code.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "trellis/v1/controller.grpc.pb.h"

namespace trellis::cli {

struct GlobalOptions {
  // Empty: $TRELLIS_ADDR, else $TRELLIS_STATE_DIR's address file, else
  // DefaultAddress().
  std::string addr;
  std::string tls_ca;     // empty: $TRELLIS_TLS_CA, else plain TCP
  double timeout_s = 30;  // deadline of each unary call
};

// The controller's default unix socket, as its owner's controller makes it:
// "unix:" + auth::DefaultSocketPath().
std::string DefaultAddress();
// The address to dial: the flag, else $TRELLIS_ADDR, else the default.
std::string ResolveAddress(const std::string& flag, const char* env_value);

// Where the controller of a state directory serves, as it wrote it there
// (common/controller_address.h): its TCP address and, with TLS, its CA file,
// checked against the digest written beside it. Errors say what to do.
struct StateDirDial {
  std::string addr;
  std::string tls_ca;  // empty: plain TCP
};
StateDirDial DialFromStateDir(const std::string& state_dir);  // throws UsageError

// A global option that cannot be used (an unreadable CA file): main prints it
// and exits with the usage code before any call is made.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ControllerClient {
 public:
  // Throws UsageError when the TLS CA file cannot be used.
  explicit ControllerClient(const GlobalOptions& options);

  v1::ControllerService::Stub& stub() { return *stub_; }
  const std::string& addr() const { return addr_; }

  // A context for one unary call: deadline from --timeout, plus the token
  // when the controller is dialled over TCP.
  std::unique_ptr<grpc::ClientContext> UnaryContext() const;
  // The same for a server stream, which has no deadline: it lasts as long as
  // the run (watch) or the output (logs --follow).
  std::unique_ptr<grpc::ClientContext> StreamContext() const;

  // Blocks until the channel is connected or `deadline` passes (watch's
  // reconnect).
  bool WaitForConnected(std::chrono::system_clock::time_point deadline);

  // Prints "trellis: <message>" lines to stderr for a failed call and
  // returns the exit code of the contract.
  int Fail(const grpc::Status& status);

 private:
  void AddMetadata(grpc::ClientContext* ctx) const;

  std::string addr_;
  std::chrono::milliseconds timeout_;
  std::string token_;          // over TCP: $TRELLIS_TOKEN, else the token file
  std::string token_problem_;  // why no token was found, told with a refusal
  bool tls_ = false;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ControllerService::Stub> stub_;
};

// Prints "trellis: <message>" to stderr.
void PrintError(const std::string& message);

}  // namespace trellis::cli
