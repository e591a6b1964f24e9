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

}  // namespace trellis::train
