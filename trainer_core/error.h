#pragma once
// trainer_core reports bad input (corpus, checkpoint, spec) by throwing
// TrainError with a message that names the file and the field; hosts catch it
// at their edge. LibTorch's c10::Error is converted to it at the Trainer API.

#include <stdexcept>
#include <string>

namespace trellis::train {

class TrainError : public std::runtime_error {
 public:
  explicit TrainError(const std::string& message) : std::runtime_error(message) {}
};

// Input the rank refuses by rule, which no retry on any node can change (a
// corpus outside the controller's data roots): a hosted rank exits with
// kExitDoNotRetry for it, so the run fails at once and no node is blamed.
class RefusedInput : public TrainError {
 public:
  using TrainError::TrainError;
};

}  // namespace trellis::train
