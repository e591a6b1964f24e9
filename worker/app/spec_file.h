#pragma once
// Reads and validates <run_dir>/spec.toml, the spec the controller stored.

#include <string>

#include "absl/status/statusor.h"
#include "common/spec/run_spec.h"

namespace trellis::worker {

absl::StatusOr<spec::RunSpec> LoadSpec(const std::string& run_dir);

}  // namespace trellis::worker
