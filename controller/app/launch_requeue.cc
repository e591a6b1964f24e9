// Slurm ending or restarting a job under a launch (docs/architecture.md,
// "Requeue and preemption"). A batch script that Slurm signalled (scancel,
// requeue, preemption, the time limit) says so after its launch ends: the
// launch is recorded as terminated and nothing is decided, because how the
// job ends (squeue, sacct) says what follows. A requeued job's batch script
// starts over and asks for its first launch: it gets the attempt's next
// launch number and is gated again, using no restart.
#include <algorithm>

#include "common/log.h"
#include "common/status.h"
#include "controller/app/launches.h"
#include "controller/slurm/parsers.h"

namespace trellis::controller {

namespace {

LaunchRecord TerminatedRow(const std::string& run_id, int attempt, int launch,
                           const std::vector<std::string>& nodes, WallTime started, WallTime now,
                           std::optional<int> exit_code, const std::string& reason) {
  LaunchRecord row;
  row.run_id = run_id;
  row.attempt = attempt;
  row.launch = launch;
  for (const auto& n : nodes) row.nodes += (row.nodes.empty() ? "" : ",") + n;
  row.started = started;
  row.ended = now;
  row.failure_class = std::string(FailureClassName(FailureClass::kTerminated));
  row.exit_code = exit_code;
  row.reason = reason;
  row.recovery = "slurm_decides";
  return row;
}

}  // namespace

Effects LaunchRequeue::Terminated(const WorkerId& id, const RunRecord& run,
                                  const AttemptRecord& attempt, int step_exit_code,
                                  NextLaunchAnswer* answer) {
  Effects fx;
  (void)attempt;
  answer->exit_code = step_exit_code;
  answer->reason = "launch " + std::to_string(id.launch) +
                   " ended under a Slurm signal; the job's end in Slurm decides what follows";
  spdlog::info("run {} attempt {} launch {}: the batch script was signalled by Slurm (step "
               "exited {}); waiting for the job's end state",
               run.run_id, id.attempt, id.launch, step_exit_code);
  LaunchState* found = registry_.Find(LaunchRegistry::RefOf(id));
  if (found == nullptr) return fx;  // the controller restarted: nothing to record
  LaunchState& l = *found;
  if (l.Go()) {
    LaunchRecord row = TerminatedRow(l.run_id, l.attempt, l.launch, l.go_nodes, l.started,
                                     ctx_.clock.Now(), step_exit_code,
                                     "Slurm signalled the batch script (scancel, requeue, "
                                     "preemption or the time limit)");
    fx.Add(RecordLaunch{row});
  }
  for (auto& w : l.waiting) fx.Add(Answer(w.reply, GateAnswer::Abort("the Slurm job is ending")));
  l.waiting.clear();
  fx.Add(UnwatchLaunch{{id.run_id, id.attempt, id.launch}});
  registry_.Forget(l.Ref(), fx);
  return fx;
}

Effects LaunchRequeue::Requeued(const WorkerId& id, const RunRecord& run,
                                const AttemptRecord& attempt, const NextLaunchQuestion& q,
                                NextLaunchAnswer* answer) {
  Effects fx;
  answer->exit_code = q.step_exit_code;
  if (IsTerminal(run.state) || !attempt.live()) {
    answer->reason = "run is " + std::string(StateName(run.state)) + ", attempt " +
                     std::to_string(attempt.attempt) + " ended: nothing to run after the requeue";
    return fx;
  }
  // The next launch number: past every launch of the attempt stored or known here.
  int last = attempt.launches;
  auto rows = ctx_.store.Launches(run.run_id);
  if (rows.ok())
    for (const auto& r : *rows)
      if (r.attempt == attempt.attempt)  // a relaunch announced took the next number
        last = std::max(last, r.recovery == "relaunch" ? r.launch + 1 : r.launch);
  WallTime now = ctx_.clock.Now();
  for (LaunchState* launch : registry_.OfRun(run.run_id, attempt.attempt)) {
    LaunchState& l = *launch;
    last = std::max(last, l.launch);
    // Killed by the requeue: recorded, never settled as a failure.
    if (l.Go()) {
      LaunchRecord row = TerminatedRow(l.run_id, l.attempt, l.launch, l.go_nodes, l.started, now,
                                       std::nullopt, "Slurm requeued the job");
      fx.Add(RecordLaunch{row});
    }
    for (auto& w : l.waiting) fx.Add(Answer(w.reply, GateAnswer::Abort("Slurm requeued the job")));
    l.waiting.clear();
    fx.Add(UnwatchLaunch{l.Ref()});
    registry_.Forget(l.Ref(), fx);
  }
  last = std::max(last, registry_.DropPlansOf(run.run_id, attempt.attempt));
  const int next = last + 1;
  // The new allocation's nodes name the nodes that never register; a list
  // that does not parse is left out (the reconciler fills it from squeue).
  std::string nodes = q.allocation_nodelist;
  if (!nodes.empty() && !ExpandHostlist(nodes).ok()) {
    spdlog::warn("run {}: requeued job's nodelist '{}' does not parse; not stored", run.run_id,
                 nodes);
    nodes.clear();
  }
  std::string reason = "Slurm requeued job " + attempt.slurm_job_id + " (restart " +
                       std::to_string(q.requeue_count) + "): launch " + std::to_string(next) +
                       " is gated again" + (nodes.empty() ? "" : " on " + nodes);
  spdlog::info("run {}: {}", run.run_id, reason);
  std::string run_id = run.run_id;
  int attempt_no = attempt.attempt;
  RecordAttemptNodes store_nodes{run_id, attempt_no, nodes};
  if (run.state == RunState::kSubmitted) {
    fx.Add(store_nodes);
    fx.Add(SetWaitReason{run_id, reason});
  } else {
    fx.Add(Transition{run_id, RunState::kSubmitted, reason, "{}", {store_nodes}});
    fx.Add(EndLaunchesOfRun{run_id, "Slurm requeued the job", attempt_no});
  }
  answer->relaunch = true;
  answer->next_launch = next;
  answer->exit_code = 0;
  answer->reason = reason;
  return fx;
}

}  // namespace trellis::controller
