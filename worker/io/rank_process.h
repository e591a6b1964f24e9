#pragma once
// Starts one rank process: its own process group (so a signal reaches
// everything the rank started), stdout and stderr appended to its log,
// stdin from /dev/null, default signal dispositions and an empty mask, and
// SIGKILL when the worker dies (PR_SET_PDEATHSIG), so that a worker killed
// outright leaves no rank behind.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/core/rank_layout.h"

namespace trellis::worker {

// Runs plan.argv_prefix (numactl binding, when planned) followed by argv.
// Creates the log's directory. Errors when the log cannot be opened or the
// program cannot be executed. The death signal fires when the calling THREAD
// ends: call it from a thread that lives as long as the rank (the agent's
// main thread).
absl::StatusOr<pid_t> SpawnRank(const RankPlan& plan, const std::vector<std::string>& argv,
                                const std::string& working_dir);

// The state letter of /proc/PID/stat's line (after the command's closing
// parenthesis, which may itself hold spaces and parentheses): 'R', 'S', 'D',
// 'T', ...; 0 when the line has none.
char ProcessStateIn(const std::string& stat_line);
// The process's state now ('T' stopped, 'D' waiting in the kernel); 0 when it
// cannot be read (gone).
char ProcessState(pid_t pid);

}  // namespace trellis::worker
