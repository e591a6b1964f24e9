#pragma once
// Validation errors that name the offending field and what is accepted.
// Torch-, gRPC- and absl-free so trainer-only builds can use the spec parser.

#include <string>
#include <vector>

namespace trellis::spec {

struct FieldError {
  std::string field;    // dotted path, e.g. "slurm.nodes"
  std::string message;  // what is wrong and what is accepted
};

using FieldErrors = std::vector<FieldError>;

// "slurm.nodes: must be an integer in [1, 100000], got -1; job.name: ..."
std::string JoinErrors(const FieldErrors& errors);

}  // namespace trellis::spec
