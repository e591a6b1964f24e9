#pragma once
// The one way the controller, worker and CLI write a whole file: readers see
// the old file or the new one, never a part (common/atomic_file_writer.h says
// how; it also streams, for writers that do not hold the bytes at once).

#include <sys/types.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace trellis {

// Replaces `path` (or creates it) with `bytes`, the file's mode `mode` less
// the umask. On an error `path` is as it was and no temporary file is left;
// the message names the file.
absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes,
                                 mode_t mode = 0644);

}  // namespace trellis
