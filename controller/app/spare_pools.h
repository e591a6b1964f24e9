#pragma once
// Spare pools (restart.spare_pool_nodes; docs/architecture.md, "Spare
// pool"): a run that trains keeps a Slurm job of its own holding a few nodes
// (its pool job); a relaunch that finds too few healthy nodes in the
// allocation draws it (LaunchEnds, recovery.h rule 5) and a new one is
// submitted to refill the pool. This part follows the pool jobs through the
// reconciler's squeue snapshots: it submits them (stored first, then sbatch,
// found again by name after a restart), marks them standing once they run,
// ends them when Slurm does, and cancels those no longer needed (the run
// ended, or the attempt that drew one). Loop thread only; reads a StoreView
// and returns Effects.

#include <map>
#include <set>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "controller/app/effects.h"
#include "controller/app/loop_context.h"
#include "controller/core/spare_pool.h"

namespace trellis::controller {

class SparePools {
 public:
  explicit SparePools(LoopContext ctx) : ctx_(ctx) {}

  // Each squeue snapshot of the reconcile tick.
  Effects OnSnapshot(const JobsSeen& seen);
  // sbatch of a pool job answered.
  Effects OnSubmitted(const JobSubmitted& answer);
  // The run ended: its live pool jobs are cancelled now.
  Effects RunEnded(const std::string& run_id);
  // The pool job that attempt `attempt` of the run drew and that holds
  // `node`, if any: a worker there runs in that job, whose allocation its
  // node is checked against instead of the attempt's.
  std::optional<std::string> DrawnJobOn(const std::string& run_id, int attempt,
                                        const std::string& node);

  // --- standby workers (spare_pool_standby.cc) ---
  // A standby worker's call (trellis-worker standby, in its pool job): the
  // pool job its node must be in (Allocations checks that next), or why the
  // call is refused (version, unknown pool job, wrong secret) or must wait
  // (the pool job's sbatch has not answered yet).
  absl::StatusOr<std::string> StandbyJob(const StandbyCall& call) const;
  // The call, its node checked: the first of a node gates its memory probe
  // as a launch would (a node that fails is struck and the pool job
  // replaced); each call is held until the next squeue snapshot, or answered
  // leave at once when the pool job was drawn or ended.
  Effects StandBy(const StandbyCall& call, ReplyTo<StandbyAnswer> reply);
  // A pool job row was stored: once it is drawn or ended, its standby
  // workers are told to leave.
  Effects PoolWritten(const PoolJobRecord& row);
  // The controller stops: held calls are answered UNAVAILABLE (workers call again).
  Effects Shutdown();

 private:
  // Answers every held standby call (the standby workers call again), and
  // ends a standing pool job one of whose workers stopped calling.
  Effects StandbysTick(WallTime now);
  struct Standby {
    std::optional<ReplyTo<StandbyAnswer>> held;
    WallTime last_heard;
    std::string verdict;  // what its gate found, told on each answer
  };
  // By (run, pool, node); gone with the pool job.
  std::map<std::tuple<std::string, int, std::string>, Standby> standbys_;

  Effects Submit(const RunRecord& run, const spec::RunSpec& spec, PoolJobRecord row);
  Effects End(PoolJobRecord row, const std::string& reason, bool cancel);
  // A pool job stored whose sbatch never answered, of a run that has ended:
  // its job by name, if Slurm took it, is cancelled (OnSubmitted).
  Effects FindToCancel(const PoolJobRecord& row);

  LoopContext ctx_;
  std::set<std::pair<std::string, int>> in_flight_;  // (run, pool) whose sbatch runs
};

// A standby worker that has not called for this long (it calls again at
// each squeue snapshot, every few seconds) is taken as lost with its node:
// its pool job is replaced.
inline constexpr std::chrono::seconds kStandbySilence{90};

// A health event of the spare pool (kSparePoolEvent): submitted, standing,
// drawn, ended; `launch` 0 where it is about no launch.
HealthEventRecord SparePoolEvent(const PoolJobRecord& row, int attempt, int launch, WallTime now,
                                 std::string detail,
                                 const nlohmann::json& j = nlohmann::json::object());

// The run's standing pool job (its nodes may join a relaunch), if any.
std::optional<PoolJobRecord> StandingPoolOf(const std::vector<PoolJobRecord>& rows);
// The pool job's nodes, expanded from Slurm's nodelist.
std::vector<std::string> PoolNodes(const PoolJobRecord& row);

}  // namespace trellis::controller
