#pragma once
// Slurm's compressed host lists ("node[1-3,5],gpu7"), as squeue, scontrol and
// sacct print an allocation. Pure: the parsers (controller/slurm) and the
// allocation check (allocation.h) both expand them.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace trellis::controller {

// "node[1-3,5],gpu7" -> {node1, node2, node3, node5, gpu7}. Bounded at 100,000 names.
absl::StatusOr<std::vector<std::string>> ExpandHostlist(std::string_view hostlist);

}  // namespace trellis::controller
