#pragma once
// training.init_from at submit (trellis fork, trellis retry): "RUN@STEP",
// "RUN@latest" or "RUN" names another run of this controller, and a path
// "DIR@STEP" a checkpoint directory. Stored as "DIR@STEP": the directory the
// ranks open and the step, found now (latest resolved), so that the run
// starts from what the user saw at submit.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/app/store_view.h"

namespace trellis::controller {

// A checkpoint found: its directory, its step, and the run whose it is when
// init_from named a run ("" for a directory given as a path).
struct InitFromFound {
  std::string dir;
  int64_t step = -1;
  std::string run;
  // "/out/runs/tiny-moe-1/checkpoints@40", as stored and as the ranks read it.
  std::string value() const { return dir + "@" + std::to_string(step); }
};

// INVALID_ARGUMENT naming the run, the step and the complete steps there
// when it cannot be found, or a directory outside `roots` (the data roots
// and the output root).
absl::StatusOr<InitFromFound> ResolveInitFrom(const std::string& init_from, StoreView& store,
                                              const std::vector<std::string>& roots);

}  // namespace trellis::controller
