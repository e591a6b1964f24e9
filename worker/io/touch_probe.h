#pragma once
// The touch probe (gate.touch_probe): allocates memory bound to one socket
// and writes every page, to tell memory the kernel can hand back (page cache
// it reclaims on demand) from memory that will not come back. Free memory
// alone says neither.
//
// The pages are allocated and touched in a forked child that binds itself
// (libnuma, strict MPOL_BIND) to the socket and marks itself the OOM killer's
// first choice: when the socket runs out, the kernel kills the child, never
// the worker, and the child's exit returns every page whatever happened.
// Bounded in bytes and in time (the child stops at the budget; the parent
// kills it shortly after if it is stuck in reclaim).

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace trellis::worker {

struct TouchProbeLimits {
  int64_t max_bytes = int64_t{8} << 30;
  std::chrono::duration<double> budget{20};
  int64_t chunk_bytes = int64_t{64} << 20;  // one allocation; progress is reported per chunk
};

struct TouchProbeResult {
  int64_t obtainable_bytes = 0;  // touched on the socket before stopping
  std::chrono::duration<double> elapsed{0};
  // Why it stopped: "bound", "time budget", "allocation failed", or
  // "killed by signal N" (the OOM killer: the socket had no more).
  std::string stopped_by;
};

// Errors: libnuma unavailable (numa_available() < 0), a node this machine
// does not have, bad limits, fork or pipe failures. Call it before the
// process starts threads that hold locks across fork (gRPC).
absl::StatusOr<TouchProbeResult> TouchProbe(int numa_node, const TouchProbeLimits& limits);

}  // namespace trellis::worker
