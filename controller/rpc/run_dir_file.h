#pragma once
// A file a worker left in a run's directory (the user's: a link is not
// followed), read whole: its final report, its step spool.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace trellis::controller {

// NotFound when there is none; an error naming the path for a link, a file
// that is not regular or one over `max_bytes`.
absl::StatusOr<std::string> ReadRunDirFile(const std::string& path, int64_t max_bytes);

}  // namespace trellis::controller
