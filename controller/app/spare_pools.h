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

#include <set>
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

 private:
  Effects Submit(const RunRecord& run, const spec::RunSpec& spec, PoolJobRecord row);
  Effects End(PoolJobRecord row, const std::string& reason, bool cancel);

  LoopContext ctx_;
  std::set<std::pair<std::string, int>> in_flight_;  // (run, pool) whose sbatch runs
};

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
