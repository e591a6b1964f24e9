#pragma once
// Failure markers: what the tail of a failed rank's log says about why it
// failed, as stable names the controller classifies failures and blames nodes
// with (docs/architecture.md, "A run's life, as implemented"). Pure.
//
// The markers, in the order they are reported (each at most once), and the
// text that sets them (case-sensitive substrings, the spelling PyTorch,
// LibTorch, CUDA, NCCL and glibc print):
//   device_oom    "CUDA out of memory" (torch.OutOfMemoryError, c10::OutOfMemoryError),
//                 "CUDA error: out of memory", "OutOfMemoryError", "cudaErrorMemoryAllocation",
//                 "CUBLAS_STATUS_ALLOC_FAILED"
//   host_oom      "std::bad_alloc", "MemoryError" (the Python exception: a whole word, so
//                 torch.OutOfMemoryError does not set it), "Cannot allocate memory" (ENOMEM)
//   nccl_error    "NCCL error", "ncclSystemError", "ncclInternalError", "ncclRemoteError",
//                 "ncclUnhandledCudaError"
//   nccl_timeout  "Watchdog caught collective operation timeout", "collective operation timeout"
//   device_error  "uncorrectable ECC", "cudaErrorECCUncorrectable", "GPU has fallen off the bus",
//                 "Xid" (a whole word, the kernel driver's error report)
//   network       "Connection reset by peer", "No route to host", "Connection refused",
//                 "Network is unreachable" (the strerror texts, anywhere in the tail)
//   damaged_checkpoint "damaged checkpoint step " (a hosted rank's line before it exits
//                 kExitDamagedCheckpoint; a generic rank may print it too: README,
//                 "Checkpoints")
//
// `network` is matched without looking for NCCL or c10d context around it: the
// rank that sees a peer's connection reset is usually not the one at fault, so
// the marker is evidence to weigh against the other ranks' markers (and
// RankExit.after_stop), not a verdict on this node. A marker only says the
// text appeared: a log that quotes an old error sets it too.

#include <string>
#include <string_view>
#include <vector>

namespace trellis::worker {

inline constexpr size_t kMaxEvidenceBytes = 512;

struct LogEvidence {
  std::vector<std::string> markers;  // in the order listed above
  // The last line that matched a marker, else the last non-empty line; at most
  // kMaxEvidenceBytes of valid UTF-8 (it travels in a proto string), escape
  // sequences and control characters removed, tabs made spaces, trimmed.
  std::string line;
};

// Scans a log tail (it may begin mid-line). Lines end at '\n' or '\r' (a
// progress bar redraws its line with '\r').
LogEvidence ScanLogTail(std::string_view tail);

}  // namespace trellis::worker
