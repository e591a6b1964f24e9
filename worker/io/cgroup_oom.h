#pragma once
// How many processes of this Slurm job the kernel's OOM killer ended: the
// oom_kill counter of the job's memory cgroup. A rank killed with SIGKILL and
// an increase of this counter during the launch means host memory ran out,
// whatever the rank's log says (docs/architecture.md, "A run's life, as
// implemented").
//
// The cgroup is found from /proc/self/cgroup:
//   cgroup v1, "N:memory:/path" (also "N:cpu,memory:/path"):
//     /sys/fs/cgroup/memory/<cg>/memory.oom_control, line "oom_kill N"
//   cgroup v2, "0::/path" (used when no v1 memory hierarchy is listed):
//     /sys/fs/cgroup/<cg>/memory.events, line "oom_kill N"
// where <cg> is the nearest ancestor of the worker's own cgroup (itself
// included) whose name starts with "job_", Slurm's job cgroup
// (.../job_<id>/step_<id>/...), so that the kills of every step and task of
// the job count; outside Slurm the worker's own cgroup. The v2 counter counts
// the whole subtree.

#include <cstdint>
#include <optional>
#include <string>

namespace trellis::worker {

// The counter, or nullopt when it cannot be read (no cgroup memory controller,
// a kernel without the oom_kill line, a cgroup namespace that hides the
// path). root prefixes every path (tests use a fake tree; "" is the machine).
std::optional<int64_t> ReadJobOomKills(const std::string& root = "");

// The increase between two readings as ReportExitRequest.oom_kills carries
// it: -1 when either reading is unknown or the counter went backwards (not the
// same cgroup). Pure.
int OomKillsBetween(std::optional<int64_t> before, std::optional<int64_t> after);

}  // namespace trellis::worker
