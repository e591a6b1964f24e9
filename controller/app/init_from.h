#pragma once
// training.init_from at submit (trellis fork, trellis retry): "RUN@STEP",
// "RUN@latest" or "RUN" names another run of this controller, and a path
// "DIR@STEP" a checkpoint directory. Stored as "DIR@STEP": the directory the
// ranks open and the step, found now (latest resolved), so that the run
// starts from what the user saw at submit.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/app/store_view.h"

namespace trellis::controller {

// "/out/runs/tiny-moe-1/checkpoints@40"; INVALID_ARGUMENT naming the run, the
// step and the complete steps there when it cannot be found, or a directory
// outside `roots` (the data roots and the output root).
absl::StatusOr<std::string> ResolveInitFrom(const std::string& init_from, StoreView& store,
                                            const std::vector<std::string>& roots);

}  // namespace trellis::controller
