#pragma once
// The step batches a worker could not get stored before it exited, as a file
// in its launch's directory (StepSpoolPath, common/run_layout.h) that the
// controller stores when it can (controller/app/step_spools.h): the records
// of a run whose controller was down or full at its end are kept, not lost.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "trellis/v1/agent.pb.h"

namespace trellis::worker {

// Writes `batches` (their numbers kept, so that a batch stored meanwhile is
// a duplicate, not a second copy) to `path`, one JSON object per line,
// atomically (common/atomic_file.h).
absl::Status WriteStepSpoolFile(const std::string& path, const std::vector<v1::StepBatch>& batches);

}  // namespace trellis::worker
