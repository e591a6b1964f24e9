#pragma once
// Launches and the gate: workers register, the gate decides GO / STANDBY /
// ABORT per node, each launch's reports are gathered, and when the batch
// script asks what comes next, the launch is classified (failure class,
// blamed node) and recovered: success, a relaunch inside the allocation, a
// new attempt or FAILED. A part of the controller (docs/architecture.md,
// "The controller's parts"): loop thread only, returns Effects.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "controller/app/effects.h"
#include "controller/app/loop_context.h"
#include "controller/app/views.h"
#include "controller/app/worker_reports.h"
#include "controller/core/decisions.h"

namespace trellis::controller {

class Launches {
 public:
  Launches(LoopContext ctx, Defer defer) : ctx_(ctx), defer_(std::move(defer)) {}

  // launches.cc: registration and the gate.
  absl::StatusOr<AttemptRecord> CheckWorker(const WorkerId& id);
  // The Slurm job id of the worker's attempt ("" before sbatch answered),
  // once its secret is checked: against the launch's cached digest while the
  // launch is known here (thousands of nodes register at once), else the store.
  absl::StatusOr<std::string> AuthenticatedJob(const WorkerId& id);
  Effects Register(const WorkerId& id, const std::string& version, const std::string& hostname,
                   const NodeProbe& probe, const SlurmStep& step, const std::string& metrics_addr,
                   Reply<GateAnswer> reply);
  // Ends the run's launches: waiting workers get ABORT, undecided gates decide no more.
  void AbortRun(const std::string& run_id, const std::string& reason);
  // The controller is stopping: waiting workers are told to register again.
  void Shutdown();
  // Ranks of the launch, or 0 when it is unknown here (after a restart).
  int WorldSize(const WorkerId& id) const;

  // launch_resume.cc: at start-up, the launches that ran when the controller
  // stopped are known again, from their stored GO (GoRecord), and watched.
  Effects ResumeAtStartup();

  // launch_end.cc: how launches end.
  void RecordRankExit(const WorkerId& id, const RankExitInfo& exit);
  // The worker's final report, stored before the reply (a controller
  // started again knows the node finished).
  Effects ReportExit(const WorkerId& id, const WorkerReport& report, Reply<bool> reply);
  // Run health's finding: the launch is stopped (its srun step signalled)
  // and the finding kept as evidence for NextLaunch.
  Effects Fault(const LaunchFaultEffect& fault);
  Effects NextLaunch(const WorkerId& id, const NextLaunchQuestion& question,
                     Reply<NextLaunchAnswer> reply);

 private:
  struct PendingRegistration {
    std::string node;
    Reply<GateAnswer> reply;
  };
  // One launch of the workers inside an attempt, while it is gated or runs.
  struct LaunchState {
    std::string run_id;
    int attempt = 0;
    int launch = 0;
    int expected_nodes = 0;
    int needed_nodes = 0;
    int ranks_per_node = 0;
    GatePolicy policy;
    // Nodes this launch may run on, where known: a relaunch's nodes; for a
    // launch resumed after a restart, the allocation its GO record kept.
    std::vector<std::string> planned;
    std::vector<NodeVerdict> registered;  // in registration order
    std::map<std::string, NodeProbe> probes;
    std::map<std::string, std::string> hostnames;
    std::map<std::string, std::string> metrics_addrs;  // node -> its worker's /metrics
    std::string secret_sha256;  // the attempt's, cached for the registrations after the first
    std::string slurm_job_id;   // the attempt's, cached likewise
    std::vector<PendingRegistration> waiting;
    std::optional<GateOutcome> outcome;
    TimerId gate_timer = 0;
    SlurmStep step;                     // of the first worker that said
    std::vector<std::string> go_nodes;  // rank order, once GO
    GateAnswer go;                      // what GO tells every node (GoAnswer)
    WallTime started;
    // What happened while it ran.
    std::map<std::string, bool> reported;  // node -> ReportExit received
    std::vector<RankExitInfo> rank_exits;
    std::map<std::string, int> oom_kills;  // node -> increase during the launch
    bool time_limit_warned = false;        // a worker passed Slurm's warning on
    LaunchFaultEffect fault;               // lost nodes and hang, from run health
    bool stopping = false;
    TimerId kill_timer = 0;
    // Known again after a controller restart (launch_resume.cc), with the
    // final reports stored before it; the rank exits streamed before it are
    // gone (a final report repeats them).
    bool resumed = false;
  };
  using LaunchKey = std::tuple<std::string, int, int>;
  static LaunchKey KeyOf(const WorkerId& id) { return {id.run_id, id.attempt, id.launch}; }
  static LaunchKey KeyOf(const LaunchRef& r) { return {r.run_id, r.attempt, r.launch}; }

  LaunchState* Create(const WorkerId& id, const spec::RunSpec& spec);
  // The nodes NextLaunch announced the relaunch `key` on: kept here, or after
  // a controller restart read back from the launch before it. Null: none.
  const std::vector<std::string>* PlannedNodes(const LaunchKey& key);
  Effects EvaluateGate(LaunchState* launch, bool timed_out);
  // The stored spec's paths against this controller's roots, as at submit.
  absl::Status PathsStillAllowed(const std::string& run_id) const;
  Effects Started(LaunchState* launch);
  // What run health and the scrape targets need of a launch that runs.
  LaunchStartedEffect Watched(const LaunchState& launch) const;
  GateAnswer GoAnswer(const LaunchState& launch, const GateOutcome& out) const;
  Effects AnswerWaiting(LaunchState* launch);
  StoreEffect GateRecord(const LaunchState& launch, const GateOutcome& out) const;
  // launch_resume.cc
  Effects Resume(const RunRecord& run, const AttemptRecord& attempt, const LaunchRecord& row);
  // launch_end.cc
  // A final report's facts join the launch's evidence.
  static void Gather(LaunchState& launch, const std::string& node, const WorkerReport& report);
  Effects Settle(LaunchState& launch, const RunRecord& run, int step_exit_code,
                 NextLaunchAnswer* answer);
  SlurmCall SignalStep(const LaunchState& launch, const std::string& signal) const;
  void Forget(std::map<LaunchKey, LaunchState>::iterator it);
  // launch_requeue.cc: Slurm ending or restarting the job under a launch.
  Effects Terminated(const WorkerId& id, const RunRecord& run, const AttemptRecord& attempt,
                     int step_exit_code, NextLaunchAnswer* answer);
  Effects Requeued(const WorkerId& id, const RunRecord& run, const AttemptRecord& attempt,
                   const NextLaunchQuestion& question, NextLaunchAnswer* answer);

  LoopContext ctx_;
  Defer defer_;
  std::map<LaunchKey, LaunchState> launches_;
  // The nodes of relaunches announced to batch scripts, until they register
  // (stored too: LaunchRecord::next_nodes).
  std::map<LaunchKey, std::vector<std::string>> planned_;
};

}  // namespace trellis::controller
