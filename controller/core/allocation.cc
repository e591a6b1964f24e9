#include "controller/core/allocation.h"

#include "controller/core/hostlist.h"

namespace trellis::controller {

absl::StatusOr<Allocation> AllocationOf(std::string_view nodelist) {
  Allocation a;
  a.nodelist = std::string(nodelist);
  if (nodelist.empty()) return a;
  auto names = ExpandHostlist(nodelist);
  if (!names.ok()) return names.status();
  a.nodes.insert(names->begin(), names->end());
  return a;
}

NodeClaim JudgeNodeClaim(const Allocation* known, std::string_view node, bool fresh,
                         std::chrono::nanoseconds since_asked,
                         std::chrono::nanoseconds reask_after) {
  if (fresh || known == nullptr) return NodeClaim::kAsk;
  if (known->nodes.count(std::string(node))) return NodeClaim::kInside;
  return since_asked < reask_after ? NodeClaim::kOutside : NodeClaim::kAsk;
}

absl::Status OutsideAllocation(std::string_view node, std::string_view job_id,
                               const Allocation& allocation) {
  // A long hostlist is cut: the message names the node and where to look.
  constexpr size_t kShown = 200;
  std::string list = allocation.nodelist.empty() ? "no nodes: the job is not running"
                                                 : allocation.nodelist.substr(0, kShown);
  if (allocation.nodelist.size() > kShown) list += "...";
  return absl::PermissionDeniedError("id.node: " + std::string(node) +
                                     " is not in the allocation of Slurm job " +
                                     std::string(job_id) + " (" + list +
                                     "); a worker acts only for a node of its attempt's job");
}

}  // namespace trellis::controller
