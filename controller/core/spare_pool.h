#pragma once
// Spare pools (restart.spare_pool_nodes; docs/architecture.md, "Spare
// pool"): a run that trains keeps a Slurm job of its own holding a few nodes;
// a relaunch that finds too few healthy nodes in its allocation draws the
// whole pool job into the launch (recovery.h, rule 5), and a new one is
// submitted in its place. What becomes of a pool job at each squeue snapshot,
// and when a run needs a new one. Pure.

#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "controller/core/run_state.h"
#include "controller/core/slurm_facts.h"

namespace trellis::controller {

// A spare pool job of a run (restart.spare_pool_nodes; docs/architecture.md,
// "Spare pool"): a Slurm job of the run's own that holds nodes until a
// relaunch draws them. Stored before its sbatch, so a controller stopped in
// between finds the job by its name.
struct PoolJobRecord {
  std::string run_id;
  int pool = 0;  // 1, 2, ... within the run
  std::string job_name;
  std::string job_id;  // "" until sbatch answered
  int nodes_asked = 0;
  std::string nodelist;  // Slurm's, once the job runs
  WallTime submitted;
  std::optional<WallTime> standing_since;  // first seen running
  int drawn_attempt = 0;  // 0: not drawn; else the attempt whose relaunch it joined
  int drawn_launch = 0;   // that relaunch
  std::optional<WallTime> ended;
  std::string end_reason;
  // Of the secret its standby workers present (trellis-worker standby), whose
  // file the controller writes beside each sbatch of the job.
  std::string secret_sha256{};
  bool live() const { return !ended.has_value(); }
  bool drawn() const { return drawn_attempt > 0; }
  // Its nodes may join a relaunch.
  bool standing() const { return live() && !drawn() && standing_since && !nodelist.empty(); }
};

// What the controller knows of a pool job at a snapshot.
struct PoolJobSeen {
  bool run_over = false;            // the run ended
  bool drawn_attempt_over = false;  // the attempt whose relaunch drew it ended
  std::optional<SlurmJob> listed;   // squeue's line for it
  // Not listed: whether its end was looked up (scontrol, sacct), and what
  // Slurm said (nullopt: Slurm no longer knows the job).
  bool looked_up = false;
  std::optional<SlurmJob> ended;
  // The time left of the job of the run's current attempt (squeue %L), where
  // it runs with a limit: a standing pool job that would end before it is
  // replaced, since one drawn would end under the launch it joined (its
  // workers lost, their node blamed).
  std::optional<std::chrono::seconds> run_job_time_left{};
  // Its nodes that are quarantined now: a standing pool job with one is
  // replaced (drawn, that node would fail the relaunch's gate).
  std::vector<std::string> quarantined{};
};

struct PoolJobStep {
  enum Kind {
    kNothing,
    kStands,  // it runs: its nodes may join a relaunch from now on
    kEnded,   // Slurm ended it
    kCancel,  // no longer needed (or of no use): scancel, then ended
  } kind = kNothing;
  std::string nodelist;  // kStands: Slurm's
  std::string reason;    // kEnded, kCancel
};

PoolJobStep DecidePoolJob(const PoolJobRecord& row, const PoolJobSeen& seen);

// After sbatch refused a pool job ("Batch job submission failed": a site's
// job limit, or no node left outside the run's and the quarantined ones),
// the next waits this long, doubling with each refusal in a row, at most an
// hour: the cause may pass (a node repaired, a job of the user's ended).
inline constexpr std::chrono::seconds kPoolRefusalBackoff{60};

// A run gets a new pool job when it trains (RUNNING), wants a pool, and has no
// live pool job that is not drawn (none submitted yet, or the last one was
// drawn or ended: a refill), once the backoff after refusals is over.
bool NeedsPoolJob(RunState state, int spare_pool_nodes, const std::vector<PoolJobRecord>& rows,
                  WallTime now);

// The refusals at the end of the run's pool jobs, newest backwards.
int PoolRefusalsInARow(const std::vector<PoolJobRecord>& rows);

// The end reason of a pool job that sbatch refused starts so.
inline constexpr char kPoolRefusedPrefix[] = "sbatch refused";

}  // namespace trellis::controller
