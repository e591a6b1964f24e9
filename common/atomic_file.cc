#include "common/atomic_file.h"

#include "common/atomic_file_writer.h"

namespace trellis {

absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes, mode_t mode) {
  AtomicFileWriter writer(path, mode);
  if (writer.Write(bytes) && writer.Commit()) return absl::OkStatus();
  return absl::InternalError(writer.error());
}

}  // namespace trellis
