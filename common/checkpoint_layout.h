#pragma once
// The checkpoint directory's layout, shared by the trainer (writes it) and
// the controller (tells a relaunch where to resume): <dir>/step-NNNNNNNN/
// holds a step's shards and manifest.json; a step is complete only once its
// manifest exists (written last, renamed into place).

#include <cstdint>
#include <optional>
#include <string>

namespace trellis {

// "step-00000120" -> 120; anything else (other files, "step-12x") -> nullopt.
std::optional<int64_t> ParseCheckpointStepDir(const std::string& name);

// The newest complete step under `dir`, or -1 when there is none (or `dir`
// does not exist yet).
int64_t NewestCompleteCheckpoint(const std::string& dir);

}  // namespace trellis
