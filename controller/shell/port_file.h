#pragma once
// --port-file and --metrics-port-file: the bound port, for a script that
// started the controller on port 0. Written once the controller serves, so
// that a reader that sees the file can dial the port.

#include <string>

#include "absl/status/status.h"

namespace trellis::controller {

// Writes "<port>\n" to `path` atomically (a reader never sees an empty or
// partial file); nothing when `path` is empty.
absl::Status WritePortFile(const std::string& path, int port);

}  // namespace trellis::controller
