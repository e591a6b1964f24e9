#include "worker/io/socket_dir.h"

#include <stdlib.h>
#include <sys/un.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "common/status.h"

namespace trellis::worker {
namespace {

// Room left in sockaddr_un for "/rank-<up to 7 digits>.sock" and the NUL.
constexpr size_t kMaxDirLength = sizeof(sockaddr_un{}.sun_path) - 24;

}  // namespace

absl::StatusOr<std::unique_ptr<SocketDir>> SocketDir::Create() {
  std::string base = "/tmp";
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') {
    std::string candidate = tmp;
    while (candidate.size() > 1 && candidate.back() == '/') candidate.pop_back();
    if (candidate.size() + 15 <= kMaxDirLength) base = candidate;
  }
  std::string tmpl = base + "/trellis-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  // mkdtemp creates the directory 0700: other users cannot reach the sockets.
  if (mkdtemp(buf.data()) == nullptr) return ErrnoStatus("cannot create a directory " + tmpl);
  return std::unique_ptr<SocketDir>(new SocketDir(buf.data()));
}

SocketDir::~SocketDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace trellis::worker
