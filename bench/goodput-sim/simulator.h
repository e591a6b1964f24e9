#pragma once
// Drives the controller's own decisions (controller/core: DecideGate,
// ClassifyLaunch, DecideRecovery, RestartBackoff, Strike, ExcludedNodes) with
// a fake clock through a failure trace, and keeps the ledger of where the
// wall time went. Pure: no I/O; randomness from the seed.
//
// One run's life (docs/architecture.md, "A run's life, as implemented"):
// QUEUED (the backoff DecideRecovery asked for) -> sbatch with the quarantine
// as --exclude -> SUBMITTED (the queue wait) -> the allocation starts: GATING
// (the job start) -> RUNNING (training: a checkpoint every checkpoint_every_s,
// stalling checkpoint_stall_s) until an interruption, the time limit or the
// horizon. An interruption is noticed after the detection time (RESTARTING),
// classified from its evidence, its blamed node struck, and DecideRecovery
// says relaunch (relaunch_s on the allocation's healthy nodes, RESTARTING) or
// a new attempt (back to QUEUED). The time limit checkpoints and continues
// as a new attempt.
//
// With continuations ahead (Strategy::continuation_ahead; docs/architecture.md,
// "Continuations ahead"): while a launch trains, DecideAhead submits the next
// attempt, eligible ChooseContinuationLead's lead before the time limit. When
// its allocation starts while the run trains, the launch stops with a
// checkpoint (ClassifyLaunch: handoff) and the new allocation trains after
// relaunch_s (RESTARTING with the handoff flag, SUBMITTED, GATING); when the
// limit comes first, the run waits for the rest of its queue wait; a new
// attempt after a failure takes it instead of an sbatch.
//
// With a spare pool (Strategy::spare_pool_nodes, spare_pool.h): a standing
// Slurm job of the run's own, passed to DecideRecovery while it runs; a
// failure that leaves too few healthy nodes relaunches with its nodes
// (draws_pool) instead of a new attempt, and its refill waits the queue.

#include <cstdint>
#include <vector>

#include "bench/goodput-sim/ledger.h"
#include "bench/goodput-sim/scenario.h"
#include "bench/goodput-sim/trace.h"

namespace trellis::bench {

struct SimResult {
  Ledger ledger;
  Counts counts;
  GoodputCheck check;
  int64_t horizon_ms = 0;

  double effective_ratio() const;  // productive / horizon
};

SimResult Simulate(const Scenario& scenario, const Strategy& strategy,
                   const std::vector<TraceEvent>& trace, uint64_t seed);

}  // namespace trellis::bench
