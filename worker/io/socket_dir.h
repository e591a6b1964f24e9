#pragma once
// A private directory for the ranks' step sockets. Unix socket paths are
// limited to 108 bytes and run directories can be long, so it lives under
// $TMPDIR (or /tmp when that is too long). Removed with its content on
// destruction.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace trellis::worker {

class SocketDir {
 public:
  static absl::StatusOr<std::unique_ptr<SocketDir>> Create();
  ~SocketDir();
  SocketDir(const SocketDir&) = delete;
  SocketDir& operator=(const SocketDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  explicit SocketDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace trellis::worker
