#include "cli/client.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/exit_status.h"
#include "common/auth.h"
#include "common/controller_address.h"
#include "common/sha256.h"
#include "common/tls.h"

namespace trellis::cli {

namespace {

bool IsUnixAddress(const std::string& addr) { return addr.rfind("unix:", 0) == 0; }

// A unix socket this user may not reach: its directory belongs to another
// user and is closed (EACCES), which gRPC reports only as "unavailable".
std::optional<std::string> ForbiddenSocket(const std::string& addr) {
  if (!IsUnixAddress(addr)) return std::nullopt;
  std::string path = addr.substr(addr.rfind("unix://", 0) == 0 ? 7 : 5);
  if (::access(path.c_str(), W_OK) == 0 || errno != EACCES) return std::nullopt;
  std::string owner;
  struct stat st {};
  std::string dir = path.substr(0, path.rfind('/'));
  if (stat(dir.c_str(), &st) == 0) {
    const passwd* pw = getpwuid(st.st_uid);
    owner = pw != nullptr ? pw->pw_name : "uid " + std::to_string(st.st_uid);
  }
  return "the controller's socket " + path + " is in a directory only its owner" +
         (owner.empty() ? "" : " (" + owner + ")") +
         " may enter: a controller serves its owner alone; run your own, or ask its owner for "
         "a token and dial it over TCP";
}

}  // namespace

std::string DefaultAddress() { return "unix:" + auth::DefaultSocketPath(); }

std::string ResolveAddress(const std::string& flag, const char* env_value) {
  if (!flag.empty()) return flag;
  if (env_value != nullptr && *env_value != '\0') return env_value;
  return DefaultAddress();
}

StateDirDial DialFromStateDir(const std::string& state_dir) {
  const std::string path = ControllerAddressPath(state_dir);
  auto a = ReadControllerAddress(path);
  if (!a.ok())
    throw UsageError("TRELLIS_STATE_DIR=" + state_dir + ": " + std::string(a.status().message()) +
                     (a.status().code() == absl::StatusCode::kNotFound
                          ? " (a controller started with --state-dir " + state_dir +
                                " writes it once it serves)"
                          : ""));
  StateDirDial dial{a->address, a->tls_ca};
  if (!dial.tls_ca.empty()) {
    std::ifstream in(dial.tls_ca);
    std::stringstream pem;
    pem << in.rdbuf();
    if (!in || Sha256Hex(pem.str()) != a->tls_ca_sha256)
      throw UsageError(path + " names the TLS CA " + dial.tls_ca +
                       ", which is missing or not the one the controller announced; set "
                       "TRELLIS_TLS_CA to the CA you trust");
  }
  return dial;
}

ControllerClient::ControllerClient(const GlobalOptions& options)
    : addr_(ResolveAddress(options.addr, std::getenv("TRELLIS_ADDR"))),
      timeout_(static_cast<int64_t>(options.timeout_s * 1000)) {
  std::string state_dir_ca;
  const char* state_dir = std::getenv("TRELLIS_STATE_DIR");
  const char* env_addr = std::getenv("TRELLIS_ADDR");
  if (options.addr.empty() && (env_addr == nullptr || *env_addr == '\0') &&
      state_dir != nullptr && *state_dir != '\0') {
    StateDirDial dial = DialFromStateDir(state_dir);
    addr_ = dial.addr;
    state_dir_ca = dial.tls_ca;
  }
  if (!IsUnixAddress(addr_)) {
    // Over TCP the controller wants a token: the environment's, else the
    // owner's file (the same user as the controller, on a shared home).
    const char* env = std::getenv("TRELLIS_TOKEN");
    if (env != nullptr && *env != '\0') {
      token_ = env;
    } else {
      auto token = auth::LoadToken(auth::DefaultTokenPath(), /*create=*/false);
      if (token.ok())
        token_ = *token;
      else
        token_problem_ = "no token: TRELLIS_TOKEN is unset and " +
                         std::string(token.status().message());
    }
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!IsUnixAddress(addr_)) {
    std::string ca = options.tls_ca;
    const char* env_ca = std::getenv("TRELLIS_TLS_CA");
    if (ca.empty() && env_ca != nullptr) ca = env_ca;
    std::string named = options.tls_ca.empty() ? "TRELLIS_TLS_CA" : "--tls-ca";
    if (ca.empty() && !state_dir_ca.empty()) {
      ca = state_dir_ca;
      named = "TRELLIS_STATE_DIR's CA";
    }
    auto loaded = tls::ChannelCredentials(named, ca);
    if (!loaded.ok()) throw UsageError(std::string(loaded.status().message()));
    credentials = *loaded;
    tls_ = !ca.empty();
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // Retry a lost connection every second or two (gRPC's default backoff grows
  // to two minutes): watch reconnects to a restarting controller promptly.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  channel_ = grpc::CreateCustomChannel(addr_, credentials, args);
  stub_ = v1::ControllerService::NewStub(channel_);
}

void ControllerClient::AddMetadata(grpc::ClientContext* ctx) const {
  if (!token_.empty()) ctx->AddMetadata("authorization", "Bearer " + token_);
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
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    if (auto forbidden = ForbiddenSocket(addr_)) {
      PrintError("not allowed: " + *forbidden);
      return ExitCodeFor(grpc::StatusCode::PERMISSION_DENIED, false);
    }
  }
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED && !token_problem_.empty())
    PrintError(token_problem_);
  for (const auto& line :
       DescribeError(status.error_code(), status.error_message(), addr_, connected)) {
    PrintError(line);
  }
  // A TLS port dialled in plain TCP, or a certificate this CA did not sign,
  // looks like an unreachable controller to gRPC.
  if (!IsUnixAddress(addr_) && !connected && status.error_code() != grpc::StatusCode::OK) {
    PrintError(tls_ ? "if the controller is up, check that its certificate is signed by the CA "
                      "given (--tls-ca / TRELLIS_TLS_CA) and names the host dialled"
                    : "if the controller serves TLS, give its CA certificate with --tls-ca or "
                      "TRELLIS_TLS_CA");
  }
  return ExitCodeFor(status.error_code(), connected);
}

void PrintError(const std::string& message) { std::cerr << "trellis: " << message << "\n"; }

}  // namespace trellis::cli
