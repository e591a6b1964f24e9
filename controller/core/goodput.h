#pragma once
// Goodput: how a run's time since submission divides between training whose
// progress was kept and everything else, from the controller's own record of
// the run's states and of the steps each launch reported (pure; see
// docs/architecture.md, "Goodput"). The categories add up to the run's time
// from submission to its end, or to `now` while it lives:
//
//   queued      QUEUED and SUBMITTED: waiting for nodes, for Slurm, and for
//               a restart's backoff before a new attempt's sbatch.
//   gating      GATING: the workers registering and the gate deciding.
//   running     RUNNING whose progress was kept: a launch's time up to its
//               newest kept step (startup included), and the rest of a launch
//               that did not fail (one still running: up to now; one
//               cancelled: up to the cancel).
//   redone      RUNNING whose work was lost: from a launch's newest kept step
//               (its start when none was kept) to its last step, and, when it
//               failed, the step it was in (taken to last as long as its last
//               step did, at most to the failure).
//   restarting  RESTARTING, and a failed launch's RUNNING time after that:
//               noticing the failure (a hang's timeout, a lost worker's
//               silence) and stopping the ranks.
//   handoff     from a handoff launch's last step (the ranks stopping for
//               the attempt waiting ahead, continuation.h) through
//               RESTARTING, SUBMITTED and GATING until the next RUNNING: the
//               gap a continuation ahead still costs.
//
// A step is kept unless a later launch (of the same or a later attempt) ran
// it again: a launch resumed from checkpoint R runs R + 1 onward, so every
// earlier launch's steps above R were redone. A launch fails when its RUNNING
// ends in RESTARTING. A run without any step record (a generic command that
// reports none) cannot tell kept work from lost: all its RUNNING time counts
// as running. In a run with step records, a failed launch that reported no
// step counts as restarting (it failed starting up).
//
// goodput_ratio = running / total (0 when total is 0). Only running can fall
// as time passes: a restart moves its failed launch's lost time, and later
// its redone steps, out of it; the other five only grow.

#include <chrono>
#include <cstdint>
#include <vector>

#include "common/clock.h"
#include "controller/core/run_state.h"

namespace trellis::controller {

// The run entered `to` at `time` (its creation included: to QUEUED), oldest
// first.
struct StateChange {
  WallTime time;
  RunState to = RunState::kQueued;
  // A RESTARTING entered because a launch stopped for the attempt waiting
  // ahead (its evidence says "handoff"): not a failure.
  bool handoff = false;
};

// A recorded step of a launch and when the controller last updated its
// summary (its last rank's record).
struct StepMark {
  int64_t step = 0;
  WallTime time;
};

// What goodput needs of one launch's steps, not all of them: ascending by
// step, its first step, its newest step below the first step of every later
// launch (where it has one), and its last step; plus how long that last step
// took (the slowest rank's time).
struct LaunchSteps {
  int attempt = 0;
  int launch = 0;
  std::vector<StepMark> marks;  // at least one
  WallTime::duration last_step_time{0};
};

struct Goodput {
  using Span = WallTime::duration;
  Span queued{0};
  Span gating{0};
  Span running{0};
  Span redone{0};
  Span restarting{0};
  Span handoff{0};

  Span total() const { return queued + gating + running + redone + restarting + handoff; }
  double ratio() const;
};

// `changes` oldest first; `launches` in (attempt, launch) order, those with a
// step only. A launch belongs to the RUNNING span its first step falls in.
Goodput ComputeGoodput(const std::vector<StateChange>& changes,
                       const std::vector<LaunchSteps>& launches, WallTime now);

}  // namespace trellis::controller
