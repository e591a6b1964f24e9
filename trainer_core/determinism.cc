#include "trainer_core/determinism.h"

namespace trellis::train {

CublasWorkspaceChoice ChooseCublasWorkspace(const char* current) {
  const std::string value = current ? current : "";
  if (value.empty()) return {kDeterministicCublasWorkspace, ""};
  if (value == kDeterministicCublasWorkspace || value == kSmallDeterministicCublasWorkspace)
    return {};
  return {"", std::string("training.deterministic: CUBLAS_WORKSPACE_CONFIG is \"") + value +
                  "\"; deterministic cuBLAS needs \"" + kDeterministicCublasWorkspace +
                  "\" or \"" + kSmallDeterministicCublasWorkspace +
                  "\" (unset it and the trainer sets \"" + kDeterministicCublasWorkspace + "\")"};
}

}  // namespace trellis::train
