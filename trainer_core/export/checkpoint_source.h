#pragma once
// Where trellis-export finds a checkpoint: "PATH[@STEP]", PATH a run
// directory (holding checkpoints/), a checkpoint directory (holding
// step-NNNNNNNN/) or one step's directory; STEP a number or "latest" (the
// default, unless PATH is a step's directory). Torch-free.

#include <cstdint>
#include <string>

namespace trellis::train {

struct CheckpointSource {
  std::string dir;         // holds step-NNNNNNNN/
  int64_t step = -1;       // a complete step of it
  std::string spec_beside;  // the run's spec.toml beside dir, "" when none
};

// Throws TrainError naming what PATH or STEP is and what is accepted, with
// the complete steps there.
CheckpointSource ResolveCheckpointSource(const std::string& arg);

}  // namespace trellis::train
