#include "controller/app/attempt_files.h"

#include <filesystem>
#include <fstream>

#include "common/atomic_file.h"
#include "common/sha256.h"

namespace trellis::controller {

absl::Status WriteAttemptFilesNow(const WriteAttemptFiles& w) {
  std::error_code ec;
  std::filesystem::create_directories(w.dir, ec);
  if (ec) return absl::InternalError("cannot create " + w.dir + ": " + ec.message());
  if (!w.kept_secret_file.empty()) {
    std::ifstream in(w.kept_secret_file);
    std::string secret;
    in >> secret;
    if (Sha256Hex(secret) != w.kept_secret_sha256)
      return absl::FailedPreconditionError("attempt " + std::to_string(w.attempt) +
                                           "'s secret file " + w.kept_secret_file +
                                           " is missing or altered");
  }
  for (const WriteAttemptFiles::File& f : w.files)
    if (absl::Status st = WriteFileAtomically(f.path, f.content, f.mode); !st.ok()) return st;
  return absl::OkStatus();
}

}  // namespace trellis::controller
