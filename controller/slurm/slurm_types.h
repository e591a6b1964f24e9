#pragma once
// What Trellis needs to know about Slurm jobs and nodes, independent of how it
// was asked (squeue, scontrol, sacct) or faked.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trellis::controller {

struct SlurmJob {
  std::string id;
  std::string state;     // base state: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...
  std::string reason;    // squeue/scontrol Reason
  std::string nodelist;  // compressed hostlist, e.g. "node[1-2]"
  std::optional<int> exit_code;  // from ExitCode=E:S: E, or 128+S when S != 0
  std::optional<int> restarts;   // scontrol Restarts=: how often Slurm requeued it
};

struct SlurmNode {
  std::string name;
  std::string state;  // sinfo %T, e.g. idle, allocated, drained, down*
};

// Terminal Slurm job states: the job will not run again.
bool IsTerminalJobState(std::string_view state);
// A node Slurm would place work on (not down, drained, draining or failing).
bool IsUsableNodeState(std::string_view state);
// A name a node may have here: [A-Za-z0-9._-]{1,255}. It reaches Slurm's
// command lines (scontrol, --exclude) and the quarantine list.
bool IsNodeName(std::string_view name);

}  // namespace trellis::controller
