#pragma once
// Launches and the gate: workers register, the gate decides GO / STANDBY /
// ABORT per node, and each launch's reports are gathered until the batch
// script asks what comes next. A part of the controller (docs/architecture.md,
// "The controller's parts"): loop thread only, returns Effects.

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "controller/app/effects.h"
#include "controller/app/loop_context.h"
#include "controller/app/views.h"
#include "controller/core/decisions.h"

namespace trellis::controller {

class Launches {
 public:
  Launches(LoopContext ctx, Defer defer) : ctx_(ctx), defer_(std::move(defer)) {}

  absl::StatusOr<AttemptRecord> CheckWorker(const WorkerId& id);
  Effects Register(const WorkerId& id, const std::string& version, const std::string& hostname,
                   const NodeProbeFigures& probe, Reply<GateAnswer> reply);
  void RecordRankExit(const WorkerId& id, const RankExitInfo& exit);
  Effects ReportExit(const WorkerId& id, const std::vector<RankExitInfo>& exits, int exit_code,
                     const std::string& reason, Reply<bool> reply);
  Effects NextLaunch(const WorkerId& id, int step_exit_code, Reply<NextLaunchAnswer> reply);
  // Ends the run's launches: waiting workers get ABORT, undecided gates decide no more.
  void AbortRun(const std::string& run_id, const std::string& reason);
  // The controller is stopping: waiting workers are told to register again.
  void Shutdown();
  // Ranks of the launch, or 0 when it is unknown here (after a restart).
  int WorldSize(const WorkerId& id) const;

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
    std::vector<NodeVerdict> registered;  // in registration order
    std::map<std::string, NodeProbeFigures> probes;
    std::map<std::string, std::string> hostnames;
    std::string secret;  // the attempt's, cached for the registrations after the first
    std::vector<PendingRegistration> waiting;
    std::optional<GateOutcome> outcome;
    std::map<std::string, bool> reported;  // node -> ReportExit received
    std::vector<RankExitInfo> rank_exits;
    TimerId gate_timer = 0;
  };
  using LaunchKey = std::tuple<std::string, int, int>;
  static LaunchKey KeyOf(const WorkerId& id) { return {id.run_id, id.attempt, id.launch}; }

  LaunchState* Create(const WorkerId& id, const spec::RunSpec& spec);
  Effects EvaluateGate(LaunchState* launch, bool timed_out);
  Effects AnswerWaiting(LaunchState* launch);
  StoreEffect GateRecord(const LaunchState& launch, const GateOutcome& out) const;
  void Forget(std::map<LaunchKey, LaunchState>::iterator it);

  LoopContext ctx_;
  Defer defer_;
  std::map<LaunchKey, LaunchState> launches_;
};

}  // namespace trellis::controller
