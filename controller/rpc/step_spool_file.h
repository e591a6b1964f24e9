#pragma once
// A worker's step spool read back (StepSpoolPath, common/run_layout.h): the
// batches it could not get stored before it exited, for the controller to
// store (controller/app/step_spools.h).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/core/step_batch.h"

namespace trellis::controller {

// The spool at `path`, every batch from `source` and checked as the Report
// stream checks one (CheckBatch). NotFound when there is none; a link, a file
// over 256 MiB, a line that is not a StepBatch as JSON or a batch refused is
// an error naming the path (and the line).
absl::StatusOr<std::vector<StepBatch>> ReadStepSpoolFile(const std::string& path,
                                                         const BatchSource& source);

}  // namespace trellis::controller
