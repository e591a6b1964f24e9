#pragma once
// The shell's writing of an attempt's files (WriteAttemptFiles, effects.h):
// the one place the scheduler's attempt preparation touches the disk.

#include "absl/status/status.h"
#include "controller/app/effects.h"

namespace trellis::controller {

// Makes the attempt's directory, checks a kept secret file against its
// digest (FAILED_PRECONDITION naming the file when it is gone or altered),
// then writes each file atomically with its mode. Stops at the first error,
// which names the path.
absl::Status WriteAttemptFilesNow(const WriteAttemptFiles& w);

}  // namespace trellis::controller
