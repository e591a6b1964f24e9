#pragma once
// The checkpoint directory's layout, shared by the trainer (writes it) and
// the controller (tells a relaunch where to resume): <dir>/step-NNNNNNNN/
// holds a step's shards and manifest.json; a step is complete only once its
// manifest exists (written last, renamed into place).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trellis {

// "step-00000120" -> 120; anything else (other files, "step-12x") -> nullopt.
std::optional<int64_t> ParseCheckpointStepDir(const std::string& name);

// The newest complete step under `dir`, or -1 when there is none (or `dir`
// does not exist yet).
int64_t NewestCompleteCheckpoint(const std::string& dir);

// Every complete step under `dir`, oldest first (none when `dir` does not
// exist).
std::vector<int64_t> CompleteCheckpoints(const std::string& dir);

// <dir>/step-NNNNNNNN, the step's directory.
std::string CheckpointStepDir(const std::string& dir, int64_t step);

// Renames the step's directory out of the step namespace, to
// <dir>/damaged-step-NNNNNNNN (".2", ".3", ... after it when that is taken),
// where it is kept for people to inspect: no resume, pruner or count sees it.
// Returns the new path, or "" with *error set (the rename's strerror).
std::string SetAsideCheckpointStep(const std::string& dir, int64_t step, std::string* error);

// "2, 4, 6", or "..., 40, 45, 50 (12 in all)" past `most`; "none" when empty.
std::string DescribeSteps(const std::vector<int64_t>& steps, size_t most = 8);

}  // namespace trellis
