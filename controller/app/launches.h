#pragma once
// The launch parts (docs/architecture.md, "The controller's parts"), each
// over the shared LaunchRegistry, loop thread only, reading a StoreView and
// returning Effects:
//   LaunchGate     workers register, the gate decides GO / STANDBY / ABORT
//                  per node (launch_gate.cc, launch_gate_answers.cc);
//   LaunchEnds     each launch's reports are gathered, run health's faults
//                  stop it, and when the batch script asks what comes next
//                  the launch is classified (failure class, blamed node) and
//                  recovered: success, a relaunch inside the allocation, a new
//                  attempt or FAILED (launch_end.cc);
//   LaunchRequeue  Slurm ending or requeuing the job under a launch
//                  (launch_requeue.cc);
//   LaunchResume   the launches that ran when the controller stopped are
//                  known again at start-up (launch_resume.cc).

#include <string>

#include "controller/app/effects.h"
#include "controller/app/launch_registry.h"
#include "controller/app/loop_context.h"
#include "controller/app/views.h"
#include "controller/app/worker_reports.h"
#include "controller/core/failure_rate.h"

namespace trellis::controller {

class LaunchGate {
 public:
  LaunchGate(LoopContext ctx, LaunchRegistry& registry) : ctx_(ctx), registry_(registry) {}

  // The Slurm job id of the worker's attempt ("" before sbatch answered),
  // once its secret is checked: against the launch's cached digest while the
  // launch is known here (thousands of nodes register at once), else the store.
  absl::StatusOr<std::string> AuthenticatedJob(const WorkerId& id);
  Effects Register(const WorkerId& id, const std::string& version, const std::string& hostname,
                   const NodeProbe& probe, const SlurmStep& step, const std::string& metrics_addr,
                   ReplyTo<GateAnswer> reply);
  // The gate's timer (kGateTimeout) fired: it decides with the nodes it has.
  Effects GateTimedOut(const LaunchRef& ref);
  // Ends the run's launches (of `attempt` only, when given): waiting workers
  // get ABORT, undecided gates decide no more.
  Effects AbortRun(const std::string& run_id, const std::string& reason,
                   std::optional<int> attempt = std::nullopt);
  // The run took up the attempt that waited ahead: the gate decides on the
  // workers it held (launch_handoff.cc).
  Effects TakenUp(const AttemptTakenUp& taken);
  // The controller is stopping: waiting workers are told to register again.
  Effects Shutdown();
  // Ranks of the launch, or 0 when it is unknown here (after a restart).
  int WorldSize(const WorkerId& id) const;

 private:
  LaunchState* Create(const WorkerId& id, const spec::RunSpec& spec, Effects& fx);
  Effects EvaluateGate(LaunchState* launch, bool timed_out);
  // The stored spec's paths against this controller's roots, as at submit.
  absl::Status PathsStillAllowed(const std::string& run_id) const;
  Effects Started(LaunchState* launch);
  // launch_handoff.cc: the gate of an attempt waiting ahead decided. GO: the
  // run's current launch stops at a step boundary (a handoff; at its GO if
  // none runs now). ABORT: the waiting attempt is given up, its job cancelled.
  Effects HeldGateDecided(LaunchState* held, const GateOutcome& out);
  // The run's launch that runs now is told to stop for `held`; none: later.
  Effects HandOver(const LaunchState& held);
  // A launch of the run went GO: a held attempt that is ready hands over now.
  Effects HandOverIfReady(const std::string& run_id);
  // launch_gate_answers.cc: what the gate records and tells the nodes.
  GateAnswer GoAnswer(const LaunchState& launch, const GateOutcome& out) const;
  Effects AnswerWaiting(LaunchState* launch);
  RecordGate GateRecord(const LaunchState& launch, const GateOutcome& out) const;
  FailureHistory FailureHistorySeen() const;

  LoopContext ctx_;
  LaunchRegistry& registry_;
};

// How many of the newest runs the nodes' failure rate is read from.
inline constexpr int kFailureHistoryRuns = 200;

class LaunchRequeue {
 public:
  LaunchRequeue(LoopContext ctx, LaunchRegistry& registry) : ctx_(ctx), registry_(registry) {}

  // The batch script was signalled by Slurm: the launch is recorded as
  // terminated, and how the job ends decides what follows.
  Effects Terminated(const WorkerId& id, const RunRecord& run, const AttemptRecord& attempt,
                     int step_exit_code, NextLaunchAnswer* answer);
  // Slurm requeued the job: its batch script gets the attempt's next launch.
  Effects Requeued(const WorkerId& id, const RunRecord& run, const AttemptRecord& attempt,
                   const NextLaunchQuestion& question, NextLaunchAnswer* answer);

 private:
  LoopContext ctx_;
  LaunchRegistry& registry_;
};

class LaunchEnds {
 public:
  LaunchEnds(LoopContext ctx, LaunchRegistry& registry, LaunchRequeue& requeue)
      : ctx_(ctx), registry_(registry), requeue_(requeue) {}

  void RecordRankExit(const WorkerId& id, const RankExitInfo& exit);
  // The worker's final report, stored before the reply (a controller
  // started again knows the node finished).
  Effects ReportExit(const WorkerId& id, const WorkerReport& report, ReplyTo<bool> reply);
  // Run health's finding: the launch is stopped (its srun step signalled)
  // and the finding kept as evidence for NextLaunch.
  Effects Fault(const LaunchFault& fault);
  // The stop's grace (kStopGrace) is over: the step is killed.
  Effects StopGraceOver(const LaunchRef& ref);
  Effects NextLaunch(const WorkerId& id, const NextLaunchQuestion& question,
                     ReplyTo<NextLaunchAnswer> reply);
  // The signal to the launch's srun steps: its own job's and its pool jobs'.
  static Effects StepSignal(const LaunchState& launch, const std::string& signal);

 private:
  Effects Settle(LaunchState& launch, const RunRecord& run, int step_exit_code,
                 NextLaunchAnswer* answer);
  Effects WaitingStepEnded(const WorkerId& id, const AttemptRecord& attempt, int step_exit_code,
                           ReplyTo<NextLaunchAnswer> reply);

  LoopContext ctx_;
  LaunchRegistry& registry_;
  LaunchRequeue& requeue_;
};

class LaunchResume {
 public:
  LaunchResume(LoopContext ctx, LaunchRegistry& registry) : ctx_(ctx), registry_(registry) {}
  // At start-up, the launches that ran when the controller stopped are known
  // again, from their stored GO (GoRecord), and watched.
  Effects ResumeAtStartup();

 private:
  Effects Resume(const RunRecord& run, const AttemptRecord& attempt, const LaunchRecord& row);
  bool HandedOver(const std::string& run_id, int attempt, int launch);

  LoopContext ctx_;
  LaunchRegistry& registry_;
};

// The launch parts over one registry.
struct Launches {
  explicit Launches(LoopContext ctx)
      : gate(ctx, registry), requeue(ctx, registry), ends(ctx, registry, requeue),
        resume(ctx, registry) {}
  Launches(const Launches&) = delete;
  Launches& operator=(const Launches&) = delete;

  LaunchRegistry registry;
  LaunchGate gate;
  LaunchRequeue requeue;
  LaunchEnds ends;
  LaunchResume resume;
};

}  // namespace trellis::controller
