#include "cli/exit_status.h"

#include <cctype>

namespace trellis::cli {

int ExitCodeFor(grpc::StatusCode code, bool connected) {
  switch (code) {
    case grpc::StatusCode::OK:
      return kExitOk;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::ALREADY_EXISTS:
      return kExitUsage;
    case grpc::StatusCode::NOT_FOUND:
      return kExitNotFound;
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return kExitNotAllowed;
    case grpc::StatusCode::UNAVAILABLE:
      return kExitUnreachable;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return kExitNoSpace;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return connected ? kExitRunFailed : kExitUnreachable;
    default:
      return kExitRunFailed;
  }
}

int ExitCodeForFinalState(v1::RunState state) {
  return state == v1::RUN_STATE_SUCCEEDED ? kExitOk : kExitRunFailed;
}

namespace {

// Whether `s` starts with "<field>: ", a field being a dotted path such as
// "slurm.nodes" or "env.NCCL_MAX_CTAS" (no spaces).
bool StartsWithField(std::string_view s) {
  size_t colon = s.find(": ");
  if (colon == 0 || colon == std::string_view::npos) return false;
  for (char c : s.substr(0, colon)) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
              c == '[' || c == ']';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> SplitFieldErrors(std::string_view message) {
  std::vector<std::string> out;
  size_t start = 0;
  size_t from = 0;
  while (true) {
    size_t sep = message.find("; ", from);
    if (sep == std::string_view::npos) break;
    if (StartsWithField(message.substr(sep + 2))) {
      out.emplace_back(message.substr(start, sep - start));
      start = sep + 2;
    }
    from = sep + 2;
  }
  out.emplace_back(message.substr(start));
  return out;
}

std::vector<std::string> DescribeError(grpc::StatusCode code, std::string_view message,
                                       std::string_view addr, bool connected) {
  std::string msg(message);
  switch (ExitCodeFor(code, connected)) {
    case kExitUsage:
      return SplitFieldErrors(message);
    case kExitUnreachable: {
      std::string why = code == grpc::StatusCode::DEADLINE_EXCEEDED ? "no connection in time" : msg;
      return {"cannot reach the controller at " + std::string(addr) + " (" + why +
              "); set the address with --addr (unix:PATH or HOST:PORT) or TRELLIS_ADDR, or point "
              "TRELLIS_STATE_DIR at the controller's state directory"};
    }
    case kExitNotAllowed:
      return {"not allowed: " + msg};
    case kExitNoSpace:
      return {msg, "nothing was stored; send it again once the controller has space"};
    default:
      break;
  }
  if (code == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return {"the controller at " + std::string(addr) +
            " did not answer in time (raise --timeout): " + msg};
  }
  return {msg};
}

}  // namespace trellis::cli
