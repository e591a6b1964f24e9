#pragma once
// The CLI's unix socket: its directory private to the owner, and its path
// free to bind.

#include <string>

#include "absl/status/status.h"

namespace trellis::controller {

// Checks `path` (auth::CheckSocketPath), makes its directory private (0700),
// and frees the path: a socket left by a controller that died is removed;
// one that answers belongs to a running controller, and anything else at the
// path is left alone: both are errors.
absl::Status PrepareSocketPath(const std::string& path);

}  // namespace trellis::controller
