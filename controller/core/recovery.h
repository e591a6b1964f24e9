#pragma once
// What the controller does after a launch ends (docs/architecture.md, "A run's
// life, as implemented"), from the launch's verdict (failure_class.h). Pure.
//
// Rules, first match wins:
//   1. succeeded                         -> kSucceed
//   2. not retryable (user error, cancel) -> kFail; out of device or host
//      memory too, unless policy.retry_oom: it would run out again
//   3. gate abort, time limit, handoff, preemption -> kNewAttempt now, using
//      no restart (a handoff's new attempt is the one waiting ahead)
//      (`uses_restart` false). The gate's failing nodes are quarantined, so the
//      scheduler waits for eligible nodes rather than loop; a time limit or a
//      preemption is not the program's fault, and will become a continuation
//      from the newest checkpoint rather than a restart. Except a time limit
//      that left no checkpoint newer than the step its launch resumed from
//      (`Progress`): the next attempt would redo the same work, so it is a
//      restart like a failure (rules 4 and 6; never a relaunch, the
//      allocation is ending), and a run that never checkpoints stops when
//      its budget is spent instead of looping.
//  3b. damaged checkpoint (a rank found the step it resumed from damaged):
//      that step is set aside (`set_aside_step`; the shell renames it out of
//      the step namespace) and the run goes on from the newest intact one,
//      using no restart: a relaunch on the allocation's healthy nodes when
//      rule 5's conditions hold, else a new attempt now. Unless the step was
//      set aside before (the rename failed) or the launch's resume step is
//      unknown: then rules 4-6.
//   4. restarts_so_far >= policy.max_restarts -> kFail, the reason says so.
//   5. the allocation still holds nodes_needed healthy nodes (allocation minus
//      `unhealthy` minus the blamed node) and policy.relaunch_in_allocation:
//      kRelaunch on all of them, spares included (the gate picks the best
//      again), at once: the nodes are already ours. Too few, but enough with
//      the nodes of the run's standing spare pool job (`pool`,
//      restart.spare_pool_nodes): kRelaunch on them and the whole pool
//      (`draws_pool`), no new attempt; the shell refills the pool.
//   6. otherwise kNewAttempt after RestartBackoff().
// Relaunches and new attempts after a failure share max_restarts.
//
// The backoff doubles with the restarts since the run last trained
// restart.backoff_reset_s without interruption (BackoffRestarts), not with all
// of them: a crash loop waits longer and longer, a run that fails once a day
// waits backoff_s each time. max_restarts still counts every restart (the
// user's budget).

#include <chrono>
#include <cstdint>
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

// What a launch left to resume from: the step it resumed from (-1: it
// started fresh) and the newest complete checkpoint when it ended.
struct Progress {
  int64_t resumed_from = -1;
  int64_t newest_checkpoint = -1;
  bool Made() const { return newest_checkpoint > resumed_from; }
};

// A spare pool job of the run that stands (RUNNING, nodes known, not drawn):
// its nodes may join a relaunch (docs/architecture.md, "Spare pool").
struct StandingPool {
  std::string job_id;
  std::vector<std::string> nodes;
};

struct RecoveryInput {
  LaunchVerdict verdict;
  // Time limits and damaged checkpoints: nullopt when unknown (no
  // checkpoint directory), taken as progress.
  std::optional<Progress> progress;
  // The steps the run's earlier launches set aside as damaged.
  std::vector<int64_t> set_aside_before;
  // The Slurm job's nodes, and those of the pool jobs this attempt drew
  // before; empty if unknown.
  std::vector<std::string> allocation_nodes;
  std::optional<StandingPool> pool;           // the run's standing pool job, if any
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
  // A damaged checkpoint step to rename out of the run's checkpoint directory
  // before the run goes on.
  std::optional<int64_t> set_aside_step{};
  std::string draws_pool{};  // kRelaunch: the spare pool job whose nodes `nodes` includes
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
