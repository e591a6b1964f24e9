#include "controller/shell/socket_path.h"

#include <unistd.h>

#include <filesystem>

#include "common/auth.h"
#include "common/status.h"
#include "common/unix_socket_liveness.h"

namespace trellis::controller {

absl::Status PrepareSocketPath(const std::string& path) {
  RETURN_IF_ERROR(auth::CheckSocketPath(path));
  RETURN_IF_ERROR(auth::EnsurePrivateDir(std::filesystem::path(path).parent_path().string()));
  switch (ProbeUnixSocket(path)) {
    case UnixSocketState::kAbsent:
      return absl::OkStatus();
    case UnixSocketState::kNotASocket:
      return absl::FailedPreconditionError(path + " exists and is not a socket");
    case UnixSocketState::kServed:
      return absl::FailedPreconditionError(path +
                                           " is served by a running controller; stop it or "
                                           "give this one another --socket");
    case UnixSocketState::kStale:
      break;
  }
  if (::unlink(path.c_str()) != 0) return ErrnoStatus("cannot remove the stale socket " + path);
  return absl::OkStatus();
}

}  // namespace trellis::controller
