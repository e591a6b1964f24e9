#pragma once
// The launches known to the controller while they are gated or run, shared
// by the launch parts (docs/architecture.md, "The controller's parts"):
// LaunchGate (registration and the gate), LaunchEnds (how a launch ends),
// LaunchRequeue (Slurm ending or requeuing its job) and LaunchResume (the
// launches that ran before a controller restart). Each part reads a
// StoreView and returns Effects; `Launches` holds them over one registry.
// Loop thread only.

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "controller/app/effects.h"
#include "controller/app/loop_context.h"
#include "controller/app/views.h"
#include "controller/app/worker_reports.h"
#include "controller/core/decisions.h"

namespace trellis::controller {

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
  struct Waiting {
    std::string node;
    ReplyTo<GateAnswer> reply;
  };
  std::vector<Waiting> waiting;  // registrations the gate has not answered
  std::optional<GateOutcome> outcome;
  bool gate_timer = false;            // running
  SlurmStep step;                     // of the first worker that said, in the attempt's job
  // Steps of the launch in the run's spare pool jobs (srun --jobid): stopped
  // and signalled with `step`. Not kept over a restart: the batch script
  // stops them when `step` ends.
  std::vector<SlurmStep> pool_steps;
  std::vector<std::string> go_nodes;  // rank order, once GO
  GateAnswer go;                      // what GO tells every node (GoAnswer)
  WallTime started;
  // What happened while it ran.
  std::map<std::string, bool> reported;  // node -> ReportExit received
  std::vector<RankExitInfo> rank_exits;
  std::map<std::string, int> oom_kills;  // node -> increase during the launch
  bool time_limit_warned = false;        // a worker passed Slurm's warning on
  LaunchFault fault;                     // lost nodes and hang, from run health
  bool stopping = false;
  bool stop_timer = false;  // running
  // Known again after a controller restart (launch_resume.cc), with the
  // final reports stored before it; the rank exits streamed before it are
  // gone (a final report repeats them).
  bool resumed = false;
  // Continuations ahead (launch_handoff.cc). `held`: a launch of the run's
  // attempt waiting ahead, whose workers the gate judges but does not start
  // until the run takes the attempt up; `ready` once they passed, when the
  // run's current launch is told to stop. `handoff`: the current launch,
  // stopping for it. `gate_timed_out`: its gate's timer fired while held.
  bool held = false;
  bool ready = false;
  bool handoff = false;
  bool gate_timed_out = false;

  LaunchRef Ref() const { return {run_id, attempt, launch}; }
  bool Go() const { return outcome && outcome->kind == GateOutcome::kGo; }
  // A final report's facts join the launch's evidence.
  void Gather(const std::string& node, const WorkerReport& report);
};

class LaunchRegistry {
 public:
  static LaunchRef RefOf(const WorkerId& id) { return {id.run_id, id.attempt, id.launch}; }

  LaunchState* Find(const LaunchRef& ref);
  const LaunchState* Find(const LaunchRef& ref) const;
  LaunchState& Add(const LaunchRef& ref);
  // No longer known here; its timers are cancelled.
  void Forget(const LaunchRef& ref, Effects& fx);
  // The run's launches (of `attempt` only, when given).
  std::vector<LaunchState*> OfRun(const std::string& run_id, std::optional<int> attempt = {});
  std::vector<LaunchState*> All();

  // The nodes NextLaunch announced the relaunch `ref` on, until it
  // registers: kept here, or after a controller restart read back from the
  // launch before it (LaunchRecord::next_nodes). Null: none.
  const std::vector<std::string>* PlannedNodes(const LaunchRef& ref, StoreView& store);
  void Plan(const LaunchRef& ref, std::vector<std::string> nodes);
  void DropPlan(const LaunchRef& ref);
  // Drops the attempt's plans; returns the highest launch number among them (0: none).
  int DropPlansOf(const std::string& run_id, int attempt);

 private:
  using Key = std::tuple<std::string, int, int>;
  static Key KeyOf(const LaunchRef& r) { return {r.run_id, r.attempt, r.launch}; }
  std::map<Key, LaunchState> launches_;
  std::map<Key, std::vector<std::string>> planned_;
};

// Cancels the launch's running timers.
void StopTimers(LaunchState& launch, Effects& fx);
// The worker's attempt, once its secret is checked against the stored digest.
absl::StatusOr<AttemptRecord> CheckWorker(StoreView& store, const WorkerId& id);
// What run health and the scrape targets need of a launch that runs.
WatchLaunch WatchOf(const LaunchState& launch, const LoopContext& ctx);

}  // namespace trellis::controller
