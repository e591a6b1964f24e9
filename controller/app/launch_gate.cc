#include "controller/app/launches.h"

#include <set>

#include "common/auth.h"
#include "common/exit_codes.h"
#include "common/sha256.h"
#include "common/log.h"
#include "common/status.h"
#include "common/version.h"
#include "controller/app/gate_json.h"
#include "controller/app/launch_answers.h"
#include "controller/app/spec_paths.h"
#include "controller/slurm/parsers.h"

namespace trellis::controller {

namespace {
// The stored digest against the presented secret's, in constant time: the
// secret is the worker's only credential, and the store keeps no clear copy.
bool SecretMatches(const std::string& stored_sha256, const std::string& presented) {
  return auth::TokensEqual(Sha256Hex(presented), stored_sha256);
}
}  // namespace

absl::StatusOr<std::string> LaunchGate::AuthenticatedJob(const WorkerId& id) {
  const LaunchState* known = registry_.Find(LaunchRegistry::RefOf(id));
  if (known != nullptr && !known->slurm_job_id.empty()) {
    if (!SecretMatches(known->secret_sha256, id.secret))
      return absl::PermissionDeniedError("wrong secret for run " + id.run_id + " attempt " +
                                         std::to_string(id.attempt));
    return known->slurm_job_id;
  }
  auto attempt = CheckWorker(ctx_.store, id);
  if (!attempt.ok()) return attempt.status();
  return attempt->slurm_job_id;
}

LaunchState* LaunchGate::Create(const WorkerId& id, const spec::RunSpec& spec, Effects& fx) {
  LaunchRef ref = LaunchRegistry::RefOf(id);
  LaunchState& l = registry_.Add(ref);
  l.expected_nodes = spec.total_nodes();
  // A relaunch runs on the nodes NextLaunch named: the gate waits for those.
  if (const std::vector<std::string>* planned = registry_.PlannedNodes(ref, ctx_.store)) {
    l.planned = *planned;
    l.expected_nodes = static_cast<int>(l.planned.size());
    registry_.DropPlan(ref);
  }
  l.needed_nodes = spec.slurm.nodes;
  l.ranks_per_node = spec.slurm.ranks_per_node;
  l.policy = GatePolicyFor(spec);
  // The gate waits at most timeout_s after the first node of the launch registers.
  l.gate_timer = true;
  fx.Add(StartTimer{{TimerKey::kGateTimeout, ref}, l.policy.timeout});
  return &l;
}

Effects LaunchGate::GateTimedOut(const LaunchRef& ref) {
  LaunchState* l = registry_.Find(ref);
  if (l == nullptr || l->outcome) return {};
  l->gate_timer = false;
  l->gate_timed_out = true;
  return EvaluateGate(l, /*timed_out=*/true);
}

Effects LaunchGate::Register(const WorkerId& id, const std::string& version,
                             const std::string& hostname, const NodeProbe& probe,
                             const SlurmStep& step, const std::string& metrics_addr,
                             ReplyTo<GateAnswer> reply) {
  auto refuse = [&](absl::StatusOr<GateAnswer> answer) { return Effects(Answer(reply, answer)); };
  if (version != kVersion) {
    return refuse(absl::FailedPreconditionError(
        "worker version " + version + " does not match controller version " +
        std::string(kVersion) + "; deploy the controller's trellis-worker on the nodes"));
  }
  Effects fx;
  LaunchState* l = nullptr;
  bool first = false;
  if (LaunchState* known = registry_.Find(LaunchRegistry::RefOf(id))) {
    // The launch is being gated: the store was consulted for its first
    // node; the others are checked against what it cached.
    l = known;
    if (!SecretMatches(l->secret_sha256, id.secret))
      return refuse(absl::PermissionDeniedError("wrong secret for run " + id.run_id +
                                                " attempt " + std::to_string(id.attempt)));
  } else {
    auto attempt = CheckWorker(ctx_.store, id);
    if (!attempt.ok()) return refuse(attempt.status());
    auto run = ctx_.store.GetRun(id.run_id);
    if (!run.ok()) return refuse(run.status());
    if (IsTerminal(run->state) || !attempt->live())
      return refuse(GateAnswer::Abort("run is " + std::string(StateName(run->state)) +
                                      ", attempt ended"));
    // A launch whose gate decided before (in an earlier life of this
    // controller, or one that ended): the stored decision answers. A second
    // gate could start ranks that already run elsewhere.
    auto past = ctx_.store.Launches(id.run_id);
    if (!past.ok()) return refuse(past.status());
    for (const LaunchRecord& row : *past) {
      if (row.attempt != id.attempt || row.launch != id.launch) continue;
      GateAnswer answer = AnswerDecidedLaunch(row, id.node);
      spdlog::info("run {} launch {}.{}: node {} registered after the gate decided; answering "
                   "{}: {}", id.run_id, id.attempt, id.launch, id.node,
                   answer.kind == GateAnswer::kGo        ? "GO"
                   : answer.kind == GateAnswer::kStandby ? "STANDBY"
                                                         : "ABORT",
                   answer.reason);
      answer.data_roots = ctx_.config.data_roots;
      return refuse(answer);
    }
    auto spec = ctx_.ParseStoredSpec(*run);
    if (!spec.ok()) return refuse(spec.status());
    l = Create(id, *spec, fx);
    l->secret_sha256 = attempt->secret_sha256;
    l->slurm_job_id = attempt->slurm_job_id;
    // Waiting ahead: judged, and held until the run takes the attempt up.
    l->held = attempt->waiting;
    // The first launch of an attempt, or a relaunch inside it.
    first = !l->held &&
            (run->state == RunState::kSubmitted || run->state == RunState::kRestarting);
    if (l->held)
      spdlog::info("run {}: attempt {}, waiting ahead, started: its workers are judged and held",
                   id.run_id, id.attempt);
  }
  if (!step.step_id.empty() && !l->slurm_job_id.empty() && step.job_id != l->slurm_job_id) {
    // A node of a spare pool job the relaunch drew: its step is that job's.
    auto seen = std::find_if(l->pool_steps.begin(), l->pool_steps.end(), [&](const SlurmStep& s) {
      return s.job_id == step.job_id && s.step_id == step.step_id;
    });
    if (seen == l->pool_steps.end()) l->pool_steps.push_back(step);
  } else if (l->step.step_id.empty() && !step.step_id.empty()) {
    l->step = step;
  }
  if (l->outcome) {
    // A registration after the decision: a worker whose answer was lost on
    // its way gets it again (an ABORT would end the launch its peers run).
    if (l->outcome->kind != GateOutcome::kGo)
      return refuse(GateAnswer::Abort("the gate of this launch already decided: " +
                                      l->outcome->reason));
    return refuse(AnswerForNode(l->go, l->go_nodes, id.node,
                                std::to_string(id.attempt) + "." + std::to_string(id.launch)));
  }
  // A repeated registration (a worker retrying) replaces the node's verdict.
  NodeVerdict verdict = JudgeNode(id.node, probe, l->policy);
  auto same = std::find_if(l->registered.begin(), l->registered.end(),
                           [&](const NodeVerdict& v) { return v.node == id.node; });
  if (same == l->registered.end())
    l->registered.push_back(verdict);
  else
    *same = verdict;
  l->probes[id.node] = probe;
  l->hostnames[id.node] = hostname.empty() ? id.node : hostname;
  if (metrics_addr.empty())
    l->metrics_addrs.erase(id.node);
  else
    l->metrics_addrs[id.node] = metrics_addr;
  if (!verdict.passed)
    spdlog::warn("run {}: node {} fails the gate: {}", id.run_id, id.node, verdict.reasons[0]);
  // A worker that retries (e.g. after a controller restart) replaces its old call.
  for (auto& w : l->waiting)
    if (w.node == id.node)
      fx.Add(Answer<GateAnswer>(w.reply, absl::AbortedError("superseded by a newer registration")));
  l->waiting.erase(std::remove_if(l->waiting.begin(), l->waiting.end(),
                                  [&](const LaunchState::Waiting& w) { return w.node == id.node; }),
                   l->waiting.end());
  l->waiting.push_back({id.node, reply});
  size_t count = l->registered.size();
  std::string progress = "node " + id.node + " registered (" + std::to_string(count) + " of " +
                         std::to_string(l->expected_nodes) + ")";
  if (first) {
    fx.Add(Transition{id.run_id, RunState::kGating, progress});
  } else if (l->held) {
    // The run trains meanwhile: its state and reason are the current attempt's.
  } else if ((count & (count - 1)) == 0) {
    // Progress is shown at 2, 4, 8, ... registrations: thousands of nodes
    // must not cost thousands of synchronous writes.
    fx.Add(SetWaitReason{id.run_id, progress});
  }
  fx += EvaluateGate(l, false);
  return fx;
}

Effects LaunchGate::EvaluateGate(LaunchState* l, bool timed_out) {
  Effects fx;
  if (static_cast<int>(l->registered.size()) < l->expected_nodes && !timed_out) return fx;
  // The launch's own attempt (the run's current one may be another: a
  // launch held for an attempt waiting ahead).
  std::optional<AttemptRecord> attempt;
  if (auto all = ctx_.store.Attempts(l->run_id); all.ok())
    for (const auto& a : *all)
      if (a.attempt == l->attempt) attempt = a;
  std::vector<std::string> allocated = l->planned;
  if (allocated.empty() && attempt) {
    auto names = ExpandHostlist(attempt->nodelist);
    if (names.ok()) allocated = *names;
  }
  GateOutcome out = DecideGate(l->registered, allocated, l->expected_nodes, l->needed_nodes,
                               l->ranks_per_node, timed_out, l->policy.timeout);
  if (out.kind == GateOutcome::kWaiting) return fx;
  if (l->held) return HeldGateDecided(l, out);
  // The run's paths were checked at submit, but a link inside a root may
  // have been pointed elsewhere since (hours in the queue, or a restart):
  // checked again before any rank can open them. A refusal ends the run.
  std::string paths_refused;
  if (out.kind == GateOutcome::kGo) {
    if (absl::Status paths = PathsStillAllowed(l->run_id); !paths.ok()) {
      paths_refused = std::string(paths.message()) + " (checked again at launch)";
      out.kind = GateOutcome::kAbort;
      out.reason = paths_refused;
    }
  }
  l->outcome = out;
  if (l->gate_timer) fx.Add(CancelTimer{{TimerKey::kGateTimeout, l->Ref()}});
  l->gate_timer = false;
  fx.Add(GateRecord(*l, out));
  fx.Add(CountGateDecided{l->run_id, out.kind == GateOutcome::kGo, l->probes});
  for (const auto& v : out.verdicts) {
    if (v.passed) continue;
    std::string reason;
    for (const auto& r : v.reasons) reason += (reason.empty() ? "" : "; ") + r;
    auto probe = l->probes.find(v.node);
    fx.Add(StrikeNode{v.node, reason,
                      probe == l->probes.end() ? "{}" : ProbeToJson(probe->second),
                      "gate (run " + l->run_id + ")", /*until_released=*/false});
  }
  std::string run_id = l->run_id;
  int attempt_no = l->attempt, launch_no = l->launch;
  if (out.kind == GateOutcome::kGo) {
    // The attempt's nodes, in rank order.
    std::vector<std::string> go(l->needed_nodes);
    for (const auto& a : out.assignments)
      if (a.go) go[a.node_index] = a.node;
    std::string nodes;
    for (const auto& n : go) nodes += (nodes.empty() ? "" : ",") + n;
    fx.Add(Transition{run_id, RunState::kRunning, out.reason, "{}",
                      {RecordAttemptNodes{run_id, attempt_no, nodes},
                       RecordAttemptLaunches{run_id, attempt_no, launch_no}}});
    l->go_nodes = go;
    l->go = GoAnswer(*l, out);
    fx += Started(l);
    fx += AnswerWaiting(l);
    fx += HandOverIfReady(run_id);
    return fx;
  }
  fx += AnswerWaiting(l);
  // Abort: end this Slurm job and queue a new attempt; the failing nodes are
  // quarantined now, so the next submission excludes them.
  if (attempt && !attempt->slurm_job_id.empty())
    fx.Add(CancelJob{attempt->slurm_job_id, "the gate aborted run " + run_id});
  WallTime now = ctx_.clock.Now();
  if (!paths_refused.empty()) {  // no attempt would fare better
    fx.Add(Transition{run_id, RunState::kFailed, paths_refused, "{}",
                      {RecordAttemptEnd{run_id, attempt_no, kExitDoNotRetry, paths_refused, now}}});
    return fx;
  }
  std::string why = "gate aborted attempt " + std::to_string(attempt_no) + ": " + out.reason;
  fx.Add(Transition{run_id, RunState::kQueued, why, "{}",
                    {RecordAttemptEnd{run_id, attempt_no, kExitGateAbort, why, now}}});
  return fx;
}

absl::Status LaunchGate::PathsStillAllowed(const std::string& run_id) const {
  auto run = ctx_.store.GetRun(run_id);
  if (!run.ok()) return absl::OkStatus();  // the store's trouble is reported where it is read
  auto spec = ctx_.ParseStoredSpec(*run);
  if (!spec.ok()) return absl::OkStatus();  // the scheduler fails such a run
  return CheckSpecPaths(*spec, ctx_.config.data_roots, ctx_.config.output_root);
}

Effects LaunchGate::Started(LaunchState* l) {
  Effects fx;
  l->started = ctx_.clock.Now();
  LaunchRecord row;
  row.run_id = l->run_id;
  row.attempt = l->attempt;
  row.launch = l->launch;
  for (const auto& n : l->go_nodes) row.nodes += (row.nodes.empty() ? "" : ",") + n;
  row.started = l->started;
  // Stored before any node hears GO (Effects: writes, then replies).
  GoRecord record{l->go, l->step, {}, l->metrics_addrs};
  std::set<std::string> allocation(l->planned.begin(), l->planned.end());
  for (const auto& v : l->registered) allocation.insert(v.node);  // as Settle counts it
  record.allocation.assign(allocation.begin(), allocation.end());
  row.go_json = GoRecordToJson(record);
  fx.Add(RecordLaunch{row});
  fx.Add(WatchOf(*l, ctx_));
  return fx;
}

Effects LaunchGate::AbortRun(const std::string& run_id, const std::string& reason,
                             std::optional<int> attempt) {
  Effects fx;
  for (LaunchState* launch : registry_.OfRun(run_id, attempt)) {
    LaunchState& l = *launch;
    StopTimers(l, fx);
    for (auto& w : l.waiting) fx.Add(Answer(w.reply, GateAnswer::Abort(reason)));
    l.waiting.clear();
    if (!l.outcome) {
      GateOutcome aborted;
      aborted.kind = GateOutcome::kAbort;
      aborted.reason = reason;
      l.outcome = aborted;
    }
  }
  return fx;
}

Effects LaunchGate::Shutdown() {
  Effects fx;
  for (LaunchState* launch : registry_.All()) {
    LaunchState& l = *launch;
    StopTimers(l, fx);
    for (auto& w : l.waiting)
      fx.Add(Answer<GateAnswer>(
          w.reply, absl::UnavailableError("the controller is shutting down; register again")));
    l.waiting.clear();
  }
  return fx;
}

int LaunchGate::WorldSize(const WorkerId& id) const {
  const LaunchState* l = registry_.Find(LaunchRegistry::RefOf(id));
  return l == nullptr ? 0 : l->needed_nodes * l->ranks_per_node;
}

}  // namespace trellis::controller
