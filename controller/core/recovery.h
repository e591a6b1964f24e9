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
//
// The backoff doubles with the restarts since the run last trained
// restart.backoff_reset_s without interruption (BackoffRestarts), not with all
// of them: a crash loop waits longer and longer, a run that fails once a day
// waits backoff_s each time. max_restarts still counts every restart (the
// user's budget).

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/spec/run_spec.h"
#include "controller/core/failure_class.h"

namespace trellis::controller {

// One launch of the run as the store keeps it (`launches`), for the backoff.
struct PastLaunch {
  WallTime started;                 // GO
  std::optional<WallTime> ended;    // nullopt: never settled (the controller restarted)
  std::optional<FailureClass> cls;  // how it ended; nullopt: unknown
};

struct RecoveryInput {
  LaunchVerdict verdict;
  std::vector<std::string> allocation_nodes;  // the Slurm job's nodes; empty if unknown
  std::set<std::string> unhealthy;            // blamed, lost, quarantined now
  int nodes_needed = 1;
  int restarts_so_far = 0;  // all of the run's restarts: max_restarts is their budget
  // For the backoff: the run's launches before this one, oldest first, and
  // this one's GO (nullopt: unknown). Without them the backoff doubles with
  // restarts_so_far.
  std::vector<PastLaunch> earlier_launches;
  std::optional<WallTime> launch_started;
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

// Exponential backoff before a new attempt: backoff_s, 2x, 4x, ... capped at
// one hour, for the restarts BackoffRestarts counts.
std::chrono::seconds RestartBackoff(int backoff_restarts, const spec::RestartSection& policy);

// Whether a launch that ended so used a restart (DecideRecovery's
// uses_restart): the failures rule 5 or 6 retries. Not: success, user error,
// cancel, gate, time limit, preemption, or a class ClassifyLaunch never gives.
bool UsesRestart(FailureClass cls);

// The restarts the backoff doubles for: those that ended the run's newest
// launch that trained policy.backoff_reset_s or longer (GO to its end) and
// every launch after it; restarts_so_far when no launch did (as if the run had
// just started), and at most restarts_so_far. A launch that never settled
// has an unknown length and class: not a healthy stretch, and counted as a
// restart (erring towards the wait). backoff_reset_s 0: always 0.
int BackoffRestarts(const std::vector<PastLaunch>& launches, int restarts_so_far,
                    const spec::RestartSection& policy);

}  // namespace trellis::controller
