#include "controller/core/recovery.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_join.h"
#include "controller/core/decisions.h"

namespace trellis::controller {

std::chrono::seconds RestartBackoff(int backoff_restarts, const spec::RestartSection& policy) {
  int64_t delay = static_cast<int64_t>(policy.backoff_s) << std::clamp(backoff_restarts, 0, 6);
  return std::chrono::seconds(std::min<int64_t>(delay, 3600));
}

bool UsesRestart(FailureClass cls) {
  // A list, not "retryable and not a continuation": a class added later
  // uses no restart until someone says it does.
  constexpr FailureClass kRestarted[] = {
      FailureClass::kRankExit, FailureClass::kSignal,      FailureClass::kDeviceOom,
      FailureClass::kHostOom,  FailureClass::kDeviceError, FailureClass::kNccl,
      FailureClass::kNodeLost, FailureClass::kHang};
  return std::find(std::begin(kRestarted), std::end(kRestarted), cls) != std::end(kRestarted);
}

int BackoffRestarts(const std::vector<PastLaunch>& launches, int restarts_so_far,
                    const spec::RestartSection& policy) {
  if (policy.backoff_reset_s <= 0) return 0;
  const std::chrono::seconds reset(policy.backoff_reset_s);
  int since = 0;
  for (auto it = launches.rbegin(); it != launches.rend(); ++it) {
    bool settled = it->ended.has_value() && it->cls.has_value();
    if (!settled || UsesRestart(*it->cls)) ++since;
    if (settled && *it->ended - it->started >= reset) return std::min(since, restarts_so_far);
  }
  return restarts_so_far;  // no healthy stretch on record: every restart counts
}

namespace {

// The allocation's nodes a relaunch may use: not unhealthy, not blamed.
std::vector<std::string> HealthyNodes(const RecoveryInput& in) {
  std::vector<std::string> healthy;
  for (const auto& n : in.allocation_nodes)
    if (in.unhealthy.count(n) == 0 && n != in.verdict.blamed_node &&
        std::find(healthy.begin(), healthy.end(), n) == healthy.end())
      healthy.push_back(n);
  std::sort(healthy.begin(), healthy.end(), NaturalLess);
  return healthy;
}

// Rule 5: the nodes of a relaunch, the standing pool's joining when the
// allocation's healthy nodes are too few; nullopt when none can be had.
struct RelaunchPlan {
  std::vector<std::string> nodes;
  std::string draws_pool;
};

std::optional<RelaunchPlan> PlanRelaunch(const RecoveryInput& in,
                                         const std::vector<std::string>& healthy) {
  if (!in.policy.relaunch_in_allocation || healthy.empty()) return std::nullopt;
  if (static_cast<int>(healthy.size()) >= in.nodes_needed) return RelaunchPlan{healthy, ""};
  if (!in.pool) return std::nullopt;
  RelaunchPlan plan{healthy, in.pool->job_id};
  for (const auto& n : in.pool->nodes)
    if (in.unhealthy.count(n) == 0 &&
        std::find(plan.nodes.begin(), plan.nodes.end(), n) == plan.nodes.end())
      plan.nodes.push_back(n);
  if (static_cast<int>(plan.nodes.size()) < in.nodes_needed) return std::nullopt;
  std::sort(plan.nodes.begin(), plan.nodes.end(), NaturalLess);
  return plan;
}

std::string RelaunchWhere(const RelaunchPlan& plan) {
  std::string where = " in the allocation on " + absl::StrJoin(plan.nodes, ", ");
  if (!plan.draws_pool.empty())
    where += " (the spare pool's Slurm job " + plan.draws_pool + " joins)";
  return where;
}

// Rule 3's damaged checkpoint: the step to set aside, when there is one that
// was not set aside before (then the set-aside failed, and a retry would meet
// the same files).
std::optional<int64_t> StepToSetAside(const RecoveryInput& in) {
  if (in.verdict.cls != FailureClass::kDamagedCheckpoint || !in.progress ||
      in.progress->resumed_from < 0)
    return std::nullopt;
  const int64_t step = in.progress->resumed_from;
  if (std::find(in.set_aside_before.begin(), in.set_aside_before.end(), step) !=
      in.set_aside_before.end())
    return std::nullopt;
  return step;
}

}  // namespace

RecoveryDecision DecideRecovery(const RecoveryInput& in) {
  const LaunchVerdict& v = in.verdict;
  RecoveryDecision d;
  d.not_before = in.now;
  if (v.succeeded) {
    d.kind = RecoveryDecision::kSucceed;
    d.reason = v.reason;
    return d;
  }
  if (!v.retryable) {
    d.reason = v.reason + " (" + std::string(FailureClassName(v.cls)) + ": not retried)";
    return d;
  }
  if ((v.cls == FailureClass::kDeviceOom || v.cls == FailureClass::kHostOom) &&
      !in.policy.retry_oom) {
    d.reason = v.reason + " (" + std::string(FailureClassName(v.cls)) +
               ": not retried, it would run out of memory again; use less (" +
               (v.cls == FailureClass::kDeviceOom
                    ? "training.micro_batch, parallel.activation_checkpointing, "
                      "parallel.offload_fraction"
                    : "checkpoint.async off, parallel.offload_fraction lower") +
               ") or set restart.retry_oom = true)";
    return d;
  }
  // A time limit with nothing new to resume from: the continuation would
  // start where this launch did (rule 3's exception).
  const bool time_up = v.cls == FailureClass::kTimeLimit || v.cls == FailureClass::kHandoff;
  const bool stalled = time_up && in.progress && !in.progress->Made();
  if (!stalled && (v.cls == FailureClass::kGate || time_up ||
                   v.cls == FailureClass::kPreemption)) {
    // Not the program's failure: no restart used. Time limits and preemptions
    // will continue from the newest checkpoint instead (a continuation).
    d.kind = RecoveryDecision::kNewAttempt;
    d.reason = v.reason + "; new attempt";
    return d;
  }
  std::vector<std::string> healthy = HealthyNodes(in);
  if (std::optional<int64_t> step = StepToSetAside(in)) {
    // The files, not the program or a node: no restart used, and the nodes
    // are as good as before.
    d.set_aside_step = *step;
    const std::string aside = v.reason + "; checkpoint step " + std::to_string(*step) +
                              " set aside, resuming from the newest intact one";
    if (std::optional<RelaunchPlan> plan = PlanRelaunch(in, healthy)) {
      d.kind = RecoveryDecision::kRelaunch;
      d.reason = aside + "; relaunch" + RelaunchWhere(*plan);
      d.nodes = std::move(plan->nodes);
      d.draws_pool = std::move(plan->draws_pool);
    } else {
      d.kind = RecoveryDecision::kNewAttempt;
      d.reason = aside + "; new attempt";
    }
    return d;
  }
  std::string why = v.reason;
  if (stalled)
    why += ", with no checkpoint newer than " +
           (in.progress->resumed_from < 0 ? std::string("the start")
                                          : "step " + std::to_string(in.progress->resumed_from)) +
           " it resumed from (a continuation would redo the same steps)";
  else if (v.cls == FailureClass::kDamagedCheckpoint && in.progress &&
           in.progress->resumed_from >= 0)
    why += " (step " + std::to_string(in.progress->resumed_from) +
           " was set aside before and is still there)";
  std::string used = std::to_string(in.restarts_so_far) + " of " +
                     std::to_string(in.policy.max_restarts) + " restarts used";
  if (in.restarts_so_far >= in.policy.max_restarts) {
    d.reason = why + " (" + used + ")";
    return d;
  }
  d.uses_restart = true;
  std::string nth =
      std::to_string(in.restarts_so_far + 1) + " of " + std::to_string(in.policy.max_restarts);
  const int have = static_cast<int>(healthy.size());
  std::optional<RelaunchPlan> plan;
  if (!stalled) plan = PlanRelaunch(in, healthy);
  if (plan) {
    d.kind = RecoveryDecision::kRelaunch;
    d.reason = why + "; relaunch " + nth + RelaunchWhere(*plan);
    d.nodes = std::move(plan->nodes);
    d.draws_pool = std::move(plan->draws_pool);
    return d;
  }
  // This launch's own stretch counts too: one that trained long enough
  // before failing starts the doubling again.
  bool healthy_now = in.launch_started &&
                     in.now - *in.launch_started >= std::chrono::seconds(in.policy.backoff_reset_s);
  int exponent =
      healthy_now ? 0 : BackoffRestarts(in.earlier_launches, in.restarts_so_far, in.policy);
  std::chrono::seconds delay = RestartBackoff(exponent, in.policy);
  d.kind = RecoveryDecision::kNewAttempt;
  d.not_before = in.now + delay;
  d.reason = why + "; new attempt (restart " + nth + ") in " + std::to_string(delay.count()) + " s";
  if (stalled)
    d.reason += ": a time limit without progress counts as a restart";
  else if (!in.policy.relaunch_in_allocation)
    d.reason += ": relaunch_in_allocation is off";
  else if (in.allocation_nodes.empty())
    d.reason += ": the allocation's nodes are unknown";
  else
    d.reason += ": " + std::to_string(have) + " of " + std::to_string(in.allocation_nodes.size()) +
                " allocation nodes healthy, " + std::to_string(in.nodes_needed) + " needed" +
                (in.pool ? ", with the spare pool's too" : "");
  return d;
}

}  // namespace trellis::controller
