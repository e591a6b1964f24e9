#include "cli/client.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "cli/exit_codes.h"

namespace trellis::cli {

namespace {

// Until token authentication lands, the controller records who submitted a
// run from the "trellis-user" metadata: the login name.
std::string LoginName() {
  if (const char* user = std::getenv("USER"); user != nullptr && *user != '\0') return user;
  if (const passwd* pw = getpwuid(getuid()); pw != nullptr) return pw->pw_name;
  return "";
}

}  // namespace

std::string ResolveAddress(const std::string& flag, const char* env_value) {
  if (!flag.empty()) return flag;
  if (env_value != nullptr && *env_value != '\0') return env_value;
  return kDefaultAddr;
}

ControllerClient::ControllerClient(const GlobalOptions& options)
    : addr_(ResolveAddress(options.addr, std::getenv("TRELLIS_ADDR"))),
      timeout_(static_cast<int64_t>(options.timeout_s * 1000)),
      user_(LoginName()) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // Retry a lost connection every second or two (gRPC's default backoff grows
  // to two minutes): watch reconnects to a restarting controller promptly.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  channel_ = grpc::CreateCustomChannel(addr_, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::ControllerService::NewStub(channel_);
}

void ControllerClient::AddMetadata(grpc::ClientContext* ctx) const {
  if (!user_.empty()) ctx->AddMetadata("trellis-user", user_);
}

std::unique_ptr<grpc::ClientContext> ControllerClient::UnaryContext() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + timeout_);
  AddMetadata(ctx.get());
  return ctx;
}

std::unique_ptr<grpc::ClientContext> ControllerClient::StreamContext() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  AddMetadata(ctx.get());
  return ctx;
}

bool ControllerClient::WaitForConnected(std::chrono::system_clock::time_point deadline) {
  return channel_->WaitForConnected(deadline);
}

int ControllerClient::Fail(const grpc::Status& status) {
  bool connected = channel_->GetState(false) == GRPC_CHANNEL_READY;
  for (const auto& line :
       DescribeError(status.error_code(), status.error_message(), addr_, connected)) {
    PrintError(line);
  }
  return ExitCodeFor(status.error_code(), connected);
}

void PrintError(const std::string& message) { std::cerr << "trellis: " << message << "\n"; }

}  // namespace trellis::cli
