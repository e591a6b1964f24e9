#pragma once
// What the controller does after a launch ends (docs/architecture.md, "A run's
// life, as implemented"), from the launch's verdict (failure_class.h). Pure.
//
// Rules, first match wins:
//   1. succeeded                         -> kSucceed
//   2. not retryable (user error, cancel) -> kFail
//   3. gate abort, time limit, preemption -> kNewAttempt now, using no restart
//      (`uses_restart` false). The gate's failing nodes are quarantined, so the
//      scheduler waits for eligible nodes rather than loop; a time limit or a
//      preemption is not the program's fault, and will become a continuation
//      from the newest checkpoint rather than a restart.
//   4. restarts_so_far >= policy.max_restarts -> kFail, the reason says so.
//   5. the allocation still holds nodes_needed healthy nodes (allocation minus
//      `unhealthy` minus the blamed node) and policy.relaunch_in_allocation:
//      kRelaunch on all of them, spares included (the gate picks the best
//      again), at once: the nodes are already ours.
//   6. otherwise kNewAttempt after RestartBackoff().
// Relaunches and new attempts after a failure share max_restarts.

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/spec/run_spec.h"
#include "controller/core/failure_class.h"

namespace trellis::controller {

struct RecoveryInput {
  LaunchVerdict verdict;
  std::vector<std::string> allocation_nodes;  // the Slurm job's nodes; empty if unknown
  std::set<std::string> unhealthy;            // blamed, lost, quarantined now
  int nodes_needed = 1;
  int restarts_so_far = 0;
  spec::RestartSection policy;
  WallTime now;
};

struct RecoveryDecision {
  enum Kind { kSucceed, kRelaunch, kNewAttempt, kFail } kind = kFail;
  std::vector<std::string> nodes;  // kRelaunch: the healthy allocation nodes, NaturalLess order
  WallTime not_before;             // kNewAttempt: not submitted before this
  bool uses_restart = false;       // counts against policy.max_restarts
  std::string reason;
};

RecoveryDecision DecideRecovery(const RecoveryInput& in);

// Exponential backoff before a new attempt: backoff_s, 2x, 4x, ... capped at one hour.
std::chrono::seconds RestartBackoff(int restarts_so_far, const spec::RestartSection& policy);

}  // namespace trellis::controller
