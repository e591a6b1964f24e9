// How launches end: rank exits and final reports are gathered; run health's
// faults stop a launch; NextLaunch classifies the launch, blames a node when
// the evidence points at one, and decides what follows.
#include <set>

#include "common/exit_codes.h"
#include "common/log.h"
#include "common/status.h"
#include "controller/app/launch_answers.h"
#include "controller/app/launches.h"
#include "controller/app/metrics.h"
#include "controller/slurm/slurm_client.h"

namespace trellis::controller {

namespace {

// How long the workers of a stopped launch get to stop their ranks (TERM,
// their own grace of 10 s by default, KILL) and report, before the step
// itself is killed (a stopped or lost worker cannot act on TERM).
constexpr std::chrono::seconds kStopGrace{20};

std::string_view RecoveryName(RecoveryDecision::Kind k) {
  switch (k) {
    case RecoveryDecision::kSucceed: return "succeed";
    case RecoveryDecision::kRelaunch: return "relaunch";
    case RecoveryDecision::kNewAttempt: return "new_attempt";
    case RecoveryDecision::kFail: return "fail";
  }
  return "";
}

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

void Launches::Forget(std::map<LaunchKey, LaunchState>::iterator it) {
  if (it->second.gate_timer) ctx_.clock.Cancel(it->second.gate_timer);
  if (it->second.kill_timer) ctx_.clock.Cancel(it->second.kill_timer);
  launches_.erase(it);
}

void Launches::RecordRankExit(const WorkerId& id, const RankExitInfo& exit) {
  auto it = launches_.find(KeyOf(id));
  if (it == launches_.end()) return;
  for (const auto& e : it->second.rank_exits)
    if (e.rank == exit.rank) return;
  it->second.rank_exits.push_back(exit);
}

Effects Launches::ReportExit(const WorkerId& id, const WorkerReport& report,
                             Reply<bool> reply) {
  auto a = CheckWorker(id);
  if (!a.ok()) return Effects::Reply([reply, st = a.status()] { reply(st); });
  spdlog::info("run {} attempt {} launch {}: worker on {} exited {}: {}", id.run_id, id.attempt,
               id.launch, id.node, report.exit_code, report.reason);
  Effects fx;
  WorkerReportRecord row = WorkerReportRecordOf(id, ctx_.clock.Now(), report);
  fx.writes.push_back({"final report of " + id.node + " for " + id.run_id,
                       [row](Store& s) { return s.PutWorkerReport(row); }});
  auto it = launches_.find(KeyOf(id));
  if (it != launches_.end()) Gather(it->second, id.node, report);
  fx.replies.push_back([reply] { reply(true); });
  return fx;
}

void Launches::Gather(LaunchState& l, const std::string& node, const WorkerReport& report) {
  l.reported[node] = true;
  if (report.oom_kills >= 0) l.oom_kills[node] = report.oom_kills;
  l.time_limit_warned = l.time_limit_warned || report.time_limit_warned;
  for (const auto& e : report.ranks) {
    // The final report replaces what the stream said, keeping arrival order.
    auto known = std::find_if(l.rank_exits.begin(), l.rank_exits.end(),
                              [&](const RankExitInfo& k) { return k.rank == e.rank; });
    if (known != l.rank_exits.end())
      *known = e;
    else
      l.rank_exits.push_back(e);
  }
}

SlurmCall Launches::SignalStep(const LaunchState& l, const std::string& signal) const {
  return [step = l.step, signal, run_id = l.run_id](SlurmClient& slurm) -> std::function<Effects()> {
    absl::Status st = slurm.SignalStep(step.job_id, step.step_id, signal);
    return [st, step, signal, run_id] {
      if (!st.ok())
        spdlog::error("run {}: scancel --signal={} {}.{} failed: {}", run_id, signal, step.job_id,
                      step.step_id, std::string(st.message()));
      return Effects{};
    };
  };
}

Effects Launches::Fault(const LaunchFaultEffect& fault) {
  Effects fx;
  auto it = launches_.find(KeyOf(fault.ref));
  if (it == launches_.end() || !it->second.outcome ||
      it->second.outcome->kind != GateOutcome::kGo)
    return fx;
  LaunchState& l = it->second;
  for (const auto& n : fault.lost_nodes)
    if (std::find(l.fault.lost_nodes.begin(), l.fault.lost_nodes.end(), n) ==
        l.fault.lost_nodes.end())
      l.fault.lost_nodes.push_back(n);
  for (const auto& [n, s] : fault.lost_silent_s) l.fault.lost_silent_s[n] = s;
  if (fault.hang && !l.fault.hang) l.fault.hang = fault.hang;
  if (l.stopping) return fx;
  l.stopping = true;
  if (l.step.step_id.empty()) {
    // No step to signal (a worker outside Slurm, or one too old to say):
    // end the whole job; reconciliation settles the attempt.
    spdlog::warn("run {}: launch {} cannot go on and its srun step is unknown: cancelling job",
                 l.run_id, l.launch);
    auto attempt = ctx_.store.LatestAttempt(l.run_id);
    if (attempt.ok() && attempt->has_value() && !(*attempt)->slurm_job_id.empty()) {
      std::string job = (*attempt)->slurm_job_id;
      fx.slurm.push_back([job](SlurmClient& slurm) -> std::function<Effects()> {
        absl::Status st = slurm.Cancel(job);
        return [st, job] {
          if (!st.ok()) spdlog::error("scancel {} failed: {}", job, std::string(st.message()));
          return Effects{};
        };
      });
    }
    return fx;
  }
  spdlog::warn("run {}: stopping launch {} (step {}.{}): {}", l.run_id, l.launch, l.step.job_id,
               l.step.step_id,
               fault.hang ? "rank " + std::to_string(fault.hang->rank) + " hung"
                          : "node(s) " + Joined(fault.lost_nodes) + " lost");
  // The workers stop their ranks on TERM (TERM, grace, KILL); a step still
  // there after kStopGrace is killed (a stopped or lost worker cannot act).
  fx.slurm.push_back(SignalStep(l, "TERM"));
  LaunchKey key = KeyOf(fault.ref);
  l.kill_timer = ctx_.clock.ScheduleAfter(kStopGrace, [this, key] {
    defer_([this, key] {
      Effects kill;
      auto found = launches_.find(key);
      if (found == launches_.end()) return kill;
      found->second.kill_timer = 0;
      kill.slurm.push_back(SignalStep(found->second, "KILL"));
      return kill;
    });
  });
  return fx;
}

Effects Launches::Settle(LaunchState& l, const RunRecord& run, int step_exit_code,
                         NextLaunchAnswer* answer) {
  Effects fx;
  LaunchEvidence ev;
  ev.step_exit_code = step_exit_code;
  ev.rank_ends = l.rank_exits;
  ev.go_nodes = l.go_nodes;
  for (const auto& [node, yes] : l.reported)
    if (yes) ev.reported_nodes.push_back(node);
  ev.lost_nodes = l.fault.lost_nodes;
  ev.lost_silent_s = l.fault.lost_silent_s;
  // A node that ran ranks and never sent its final report lost its worker
  // (killed, or the node died); the others' reports arrive before srun ends
  // (and are stored: a controller started again knows them).
  for (const auto& n : l.go_nodes)
    if (!l.reported.count(n) &&
        std::find(ev.lost_nodes.begin(), ev.lost_nodes.end(), n) == ev.lost_nodes.end())
      ev.lost_nodes.push_back(n);
  ev.controller_restarted = l.resumed;
  ev.hang = l.fault.hang;
  ev.oom_kills = l.oom_kills;
  ev.time_limit = l.time_limit_warned;
  LaunchVerdict v = ClassifyLaunch(ev);

  auto spec = ctx_.ParseStoredSpec(run);
  RecoveryInput in;
  in.verdict = v;
  in.nodes_needed = l.needed_nodes;
  in.restarts_so_far = run.restarts;
  // The backoff's facts (recovery.h): this launch's GO, the run's others as stored.
  in.launch_started = l.started;
  if (auto past = ctx_.store.Launches(l.run_id); past.ok())
    for (const auto& p : *past)
      if (p.attempt != l.attempt || p.launch != l.launch)
        in.earlier_launches.push_back({p.started, p.ended, ParseFailureClass(p.failure_class)});
  in.policy = spec.ok() ? spec->restart : spec::RestartSection{};
  in.now = ctx_.clock.Now();
  // The allocation: every node whose worker registered for this launch (the
  // spares too), and the nodes it was planned on.
  std::set<std::string> allocation(l.planned.begin(), l.planned.end());
  for (const auto& r : l.registered) allocation.insert(r.node);
  in.allocation_nodes.assign(allocation.begin(), allocation.end());
  for (const auto& n : ev.lost_nodes) in.unhealthy.insert(n);
  for (const auto& n : ctx_.ExcludedNow()) in.unhealthy.insert(n);
  RecoveryDecision d = DecideRecovery(in);

  spdlog::info("run {} attempt {} launch {}: {} ({}){}; {}", l.run_id, l.attempt, l.launch,
               v.reason, FailureClassName(v.cls),
               v.blamed_node.empty() ? "" : ", blames " + v.blamed_node, RecoveryName(d.kind));
  LaunchRecord row;
  row.run_id = l.run_id;
  row.attempt = l.attempt;
  row.launch = l.launch;
  row.nodes = Joined(l.go_nodes);
  row.started = l.started;
  row.ended = in.now;
  row.failure_class = std::string(FailureClassName(v.cls));
  row.exit_code = v.exit_code;
  row.reason = v.reason;
  row.blamed_node = v.blamed_node;
  row.evidence_json = v.evidence_json;
  row.recovery = std::string(RecoveryName(d.kind));
  if (d.kind == RecoveryDecision::kRelaunch) row.next_nodes = Joined(d.nodes);
  fx.writes.push_back({"launch record of " + l.run_id, [row](Store& s) { return s.PutLaunch(row); }});
  if (!v.blamed_node.empty())
    fx.strikes.push_back({v.blamed_node, v.reason, v.evidence_json,
                          "run " + l.run_id + " launch " + std::to_string(l.attempt) + "." +
                              std::to_string(l.launch)});

  answer->exit_code = v.exit_code;
  answer->reason = d.reason;
  std::string run_id = l.run_id;
  int attempt = l.attempt;
  WallTime now = in.now;
  switch (d.kind) {
    case RecoveryDecision::kSucceed:
      fx.transitions.push_back({run_id, RunState::kSucceeded, v.reason, "{}", [=](Store& s) {
                                  return s.EndAttempt(run_id, attempt, 0, v.reason, now);
                                }});
      break;
    case RecoveryDecision::kRelaunch: {
      int restarts = run.restarts + (d.uses_restart ? 1 : 0);
      fx.transitions.push_back({run_id, RunState::kRestarting, d.reason, v.evidence_json,
                                [=](Store& s) {
                                  return s.SetRestartBackoff(run_id, restarts, now);
                                }});
      ctx_.metrics.Restart(run_id, v.cls, /*relaunch=*/true);
      answer->relaunch = true;
      answer->next_launch = l.launch + 1;
      answer->nodes = d.nodes;
      answer->exit_code = 0;
      planned_[{l.run_id, l.attempt, l.launch + 1}] = d.nodes;
      break;
    }
    case RecoveryDecision::kNewAttempt:
    case RecoveryDecision::kFail:
      fx.ended_attempts.push_back({run_id, attempt, v.exit_code == 0 ? kExitError : v.exit_code,
                                   d.reason, v.evidence_json, d, v.cls});
      break;
  }
  return fx;
}

Effects Launches::NextLaunch(const WorkerId& id, const NextLaunchQuestion& q,
                             Reply<NextLaunchAnswer> reply) {
  auto a = CheckWorker(id);
  if (!a.ok()) return Effects::Reply([reply, st = a.status()] { reply(st); });
  auto run = ctx_.store.GetRun(id.run_id);
  if (!run.ok()) return Effects::Reply([reply, st = run.status()] { reply(st); });
  const int step_exit_code = q.step_exit_code;
  Effects fx;
  NextLaunchAnswer ans;
  ans.exit_code = step_exit_code;
  bool live = !IsTerminal(run->state) && a->live();
  if (q.requeue_count > 0 || (q.terminated_by_slurm && live)) {
    fx = q.requeue_count > 0 ? Requeued(id, *run, *a, q, &ans)
                             : Terminated(id, *run, *a, step_exit_code, &ans);
    fx.replies.push_back([reply, ans] { reply(ans); });
    return fx;
  }
  auto it = launches_.find(KeyOf(id));
  if (it == launches_.end()) {
    // Asked again about a launch settled before (the answer lost on its way,
    // or the controller restarted since): the same answer, not a second one.
    auto rows = ctx_.store.Launches(id.run_id);
    if (!rows.ok()) return Effects::Reply([reply, st = rows.status()] { reply(st); });
    for (const LaunchRecord& row : *rows) {
      static const std::set<std::string> kSettled = {"relaunch", "succeed", "new_attempt", "fail"};
      if (row.attempt != id.attempt || row.launch != id.launch || !kSettled.count(row.recovery))
        continue;
      ans = AnswerSettledLaunch(row, run->state == RunState::kRestarting && a->live());
      spdlog::info("run {} attempt {} launch {}: {}", id.run_id, id.attempt, id.launch, ans.reason);
      fx.replies.push_back([reply, ans] { reply(ans); });
      return fx;
    }
  }
  bool known = it != launches_.end() && it->second.outcome &&
               it->second.outcome->kind == GateOutcome::kGo;
  if (run->state == RunState::kRunning && a->live() && known) {
    // The batch script's word too: the workers' reports of the warning may
    // have been lost with a controller restarted since.
    it->second.time_limit_warned = it->second.time_limit_warned || q.time_limit_warned;
    fx += Settle(it->second, *run, step_exit_code, &ans);
  } else if (run->state == RunState::kRunning && a->live()) {
    // After a controller restart the launch's reports are gone: srun's status decides.
    std::string run_id = id.run_id;
    int attempt = id.attempt;
    WallTime now = ctx_.clock.Now();
    if (step_exit_code == 0) {
      ans.reason = "srun step exited 0";
      fx.transitions.push_back({run_id, RunState::kSucceeded, ans.reason, "{}", [=](Store& s) {
                                  return s.EndAttempt(run_id, attempt, 0, "srun step exited 0", now);
                                }});
    } else {
      ans.reason = "srun step exited " + std::to_string(step_exit_code) +
                   " (the controller restarted during the launch: no rank reports)";
      fx.ended_attempts.push_back({run_id, attempt, step_exit_code, ans.reason,
                                   "{\"step_exit_code\":" + std::to_string(step_exit_code) + "}",
                                   std::nullopt, std::nullopt});
    }
  } else if (run->state == RunState::kRestarting && a->live() && PlannedNodes(KeyOf(id))) {
    // A relaunch whose srun step ended before its workers registered (Slurm
    // refused the step, or the nodes died meanwhile): the attempt ends now.
    planned_.erase(KeyOf(id));
    ans.exit_code = step_exit_code == 0 ? kExitError : step_exit_code;
    ans.reason = "relaunch " + std::to_string(id.launch) + " did not start: srun step exited " +
                 std::to_string(step_exit_code);
    fx.ended_attempts.push_back({id.run_id, id.attempt, ans.exit_code, ans.reason,
                                 "{\"step_exit_code\":" + std::to_string(step_exit_code) + "}",
                                 std::nullopt, std::nullopt});
  } else {
    ans.reason = "run is " + std::string(StateName(run->state));
  }
  fx.settled_launches.push_back({id.run_id, id.attempt, id.launch});
  if (it != launches_.end()) Forget(it);
  fx.replies.push_back([reply, ans] { reply(ans); });
  return fx;
}

}  // namespace trellis::controller
