#include "controller/shell/port_file.h"

#include "common/atomic_file.h"

namespace trellis::controller {

absl::Status WritePortFile(const std::string& path, int port) {
  if (path.empty()) return absl::OkStatus();
  return WriteFileAtomically(path, std::to_string(port) + "\n", 0644);
}

}  // namespace trellis::controller
