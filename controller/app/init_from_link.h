#pragma once
// A run that starts from another run's checkpoint (trellis fork, retry)
// keeps its own hard links to that step's files, made at submit: the source's
// trainer prunes all but its newest checkpoints, and a link is the file
// itself, so the step stays for the new run's launches until it has
// checkpoints of its own (docs/architecture.md, "Retries and forks").

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "controller/app/init_from.h"
#include "controller/store/store.h"

namespace trellis::controller {

// <run_dir>/init-from/<source run>/checkpoints: laid out as a checkpoint
// directory, which the ranks open as one and from which `show` reads the
// source run's name.
std::string InitFromCopyDir(const std::string& run_dir, const std::string& source_run);

// Hard-links each file of step `step` under `from_dir` into the same step
// under `to_dir` (directories made), manifest.json last so that the copy is
// complete only once whole. On failure nothing of the step is left under
// `to_dir`, and the error names the file and why (EXDEV: another filesystem).
absl::Status LinkCheckpointStep(const std::string& from_dir, int64_t step,
                                const std::string& to_dir);

// At submit, for a run just stored: the source's step linked into the run's
// directory and the run's training.init_from pointed there, with an event
// saying so; where it cannot be linked, the spec stays on the source's
// directory and the event says that the run is not protected from the
// source's pruning. The run as stored after.
RunRecord KeepInitFromStep(Store& store, const RunRecord& run, const InitFromFound& source,
                           WallTime now);

}  // namespace trellis::controller
