#pragma once
// Reads the end of a rank's log, where a failing rank leaves its last words.

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace trellis::worker {

// What the worker reads of a failed rank's log for ScanLogTail.
inline constexpr size_t kRankLogTailBytes = 16 * 1024;

// The last max_bytes of the file (all of it when shorter); the first line may
// be cut. Errors name the path.
absl::StatusOr<std::string> ReadFileTail(const std::string& path, size_t max_bytes);

}  // namespace trellis::worker
