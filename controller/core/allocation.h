#pragma once
// A worker may act only for a node of its attempt's Slurm allocation
// (docs/architecture.md, "Access"): the node name it claims decides gate
// verdicts, strikes and quarantines, so it is checked against the nodes
// Slurm gave the job, not against what the controller stored (the attempt's
// row holds the GO nodes after a gate, and a requeued job's batch script
// reports its own list). Pure: the controller asks Slurm.

#include <chrono>
#include <string>
#include <string_view>
#include <unordered_set>

#include "absl/status/statusor.h"

namespace trellis::controller {

// A job's allocation as Slurm reported it.
struct Allocation {
  std::string nodelist;                  // compressed, as printed ("" = none: not running)
  std::unordered_set<std::string> nodes;  // expanded
};

// The expansion of Slurm's hostlist; "" is an allocation of no nodes.
absl::StatusOr<Allocation> AllocationOf(std::string_view nodelist);

enum class NodeClaim {
  kInside,   // allowed
  kOutside,  // refused: Slurm's answer stands
  kAsk,      // ask Slurm (again) before deciding
};

// How a claimed node is decided from the last answer Slurm gave about the
// job (`known`, nullptr: none yet), given `since_asked` that answer. A node
// outside a recent answer is refused without asking again, so a worker
// naming bogus nodes cannot keep Slurm busy; `fresh` (the question of a
// requeued job's batch script, whose allocation is new) always asks.
NodeClaim JudgeNodeClaim(const Allocation* known, std::string_view node, bool fresh,
                         std::chrono::nanoseconds since_asked,
                         std::chrono::nanoseconds reask_after);

// PERMISSION_DENIED naming the node, the job and its allocation.
absl::Status OutsideAllocation(std::string_view node, std::string_view job_id,
                               const Allocation& allocation);

}  // namespace trellis::controller
