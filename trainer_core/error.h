#pragma once
// trainer_core reports bad input (corpus, checkpoint, spec) by throwing
// TrainError with a message that names the file and the field; hosts catch it
// at their edge. LibTorch's c10::Error is converted to it at the Trainer API.

#include <cstdint>
#include <stdexcept>
#include <string>

namespace trellis::train {

class TrainError : public std::runtime_error {
 public:
  explicit TrainError(const std::string& message) : std::runtime_error(message) {}
};

// Input the rank refuses by rule, which no retry on any node can change: a
// corpus outside the controller's data roots, a file that is not a valid
// corpus (truncated, corrupt, another format), a corpus whose vocabulary
// exceeds the model's or that is shorter than one row. A hosted rank exits
// with kExitDoNotRetry for it, so the run fails at once with the reason and
// no node is blamed (a file that cannot be opened stays a plain TrainError:
// a node that misses a mount is a node's fault).
class RefusedInput : public TrainError {
 public:
  using TrainError::TrainError;
};

// A checkpoint step whose files are not what its manifest recorded (a shard
// truncated, corrupt or missing, the manifest itself unreadable JSON), as
// against one that does not fit the model or spec. A hosted rank exits with
// kExitDamagedCheckpoint for it: the controller sets the step aside and
// resumes from an older one, blaming no node.
class DamagedCheckpoint : public TrainError {
 public:
  DamagedCheckpoint(int64_t step, const std::string& message) : TrainError(message), step_(step) {}
  int64_t step() const { return step_; }

 private:
  int64_t step_;
};

}  // namespace trellis::train
