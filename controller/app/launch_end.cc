// How launches end: rank exits and final reports are gathered; run health's
// faults stop a launch; NextLaunch classifies the launch, blames a node when
// the evidence points at one, and decides what follows.
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_join.h"
#include "common/checkpoint_layout.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "common/status.h"
#include "controller/app/continuations.h"
#include "controller/app/launch_answers.h"
#include "controller/app/launches.h"
#include "controller/app/spare_pools.h"

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

// A launch that set a damaged checkpoint step aside says which in its
// stored evidence; the run's next launches read it back (set_aside_before).
constexpr char kSetAsideStep[] = "set_aside_step";

std::string WithSetAsideStep(const std::string& evidence_json, int64_t step) {
  nlohmann::json ev = nlohmann::json::parse(evidence_json, nullptr, false);
  if (!ev.is_object()) ev = nlohmann::json::object();
  ev[kSetAsideStep] = step;
  return ev.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<int64_t> SetAsideStepOf(const LaunchRecord& launch) {
  if (launch.failure_class != FailureClassName(FailureClass::kDamagedCheckpoint)) return {};
  nlohmann::json ev = nlohmann::json::parse(launch.evidence_json, nullptr, false);
  if (!ev.is_object() || !ev.contains(kSetAsideStep) || !ev[kSetAsideStep].is_number_integer())
    return {};
  return ev[kSetAsideStep].get<int64_t>();
}

// The relaunch's nodes by Slurm job: the attempt's own, and those of each
// spare pool job the attempt drew (one more srun step in each).
void SplitByJob(const std::vector<std::string>& nodes, const std::vector<PoolJobRecord>& pools,
                int attempt, NextLaunchAnswer* answer) {
  answer->nodes.clear();
  answer->other_jobs.clear();
  for (const std::string& node : nodes) {
    const PoolJobRecord* in = nullptr;
    for (const PoolJobRecord& p : pools) {
      if (p.drawn_attempt != attempt || p.job_id.empty()) continue;
      std::vector<std::string> held = PoolNodes(p);
      if (std::find(held.begin(), held.end(), node) != held.end()) in = &p;
    }
    if (in == nullptr) {
      answer->nodes.push_back(node);
      continue;
    }
    auto job = std::find_if(answer->other_jobs.begin(), answer->other_jobs.end(),
                            [&](const auto& j) { return j.job_id == in->job_id; });
    if (job == answer->other_jobs.end())
      job = answer->other_jobs.insert(answer->other_jobs.end(), {in->job_id, {}});
    job->nodes.push_back(node);
  }
}

// node -> the newest launch (any run) that ended in a lone SIGKILL on it
// within kLoneKillMemory ("run r7 launch 1.2"), from the stored evidence
// (failure_class.h: a second one blames the node).
std::map<std::string, std::string> EarlierLoneKills(StoreView& store, WallTime now) {
  std::map<std::string, std::string> out;
  auto rows = store.LaunchesEndedSince(now - kLoneKillMemory,
                                       std::string(FailureClassName(FailureClass::kSignal)));
  if (!rows.ok()) {
    spdlog::warn("earlier lone kills not read (a kill is judged alone): {}",
                 std::string(rows.status().message()));
    return out;
  }
  for (const LaunchRecord& l : *rows) {
    auto ev = nlohmann::json::parse(l.evidence_json, nullptr, false);
    if (!ev.is_object() || !ev.value("lone_kill", false) || !ev.contains("node")) continue;
    if (!ev["node"].is_string()) continue;
    out[ev["node"].get<std::string>()] = "run " + l.run_id + " launch " +
                                         std::to_string(l.attempt) + "." +
                                         std::to_string(l.launch);
  }
  return out;
}

}  // namespace

void LaunchEnds::RecordRankExit(const WorkerId& id, const RankExitInfo& exit) {
  LaunchState* l = registry_.Find(LaunchRegistry::RefOf(id));
  if (l == nullptr) return;
  for (const auto& e : l->rank_exits)
    if (e.rank == exit.rank) return;
  l->rank_exits.push_back(exit);
}

Effects LaunchEnds::ReportExit(const WorkerId& id, const WorkerReport& report,
                               ReplyTo<bool> reply) {
  auto a = CheckWorker(ctx_.store, id);
  if (!a.ok()) return Answer<bool>(reply, a.status());
  spdlog::info("run {} attempt {} launch {}: worker on {} exited {}: {}", id.run_id, id.attempt,
               id.launch, id.node, report.exit_code, report.reason);
  Effects fx;
  WorkerReportRecord row = WorkerReportRecordOf(id, ctx_.clock.Now(), report);
  fx.Add(RecordWorkerReport{row});
  if (report.unstored_step_records > 0) {
    spdlog::warn("run {}: the worker on {} exited with {} step record(s) not stored: storing "
                 "its spool",
                 id.run_id, id.node, report.unstored_step_records);
    fx.Add(StoreStepSpool{id.run_id, id.attempt, id.launch, id.node});
  }
  if (LaunchState* l = registry_.Find(LaunchRegistry::RefOf(id))) l->Gather(id.node, report);
  fx.Add(Answer(reply, true));
  return fx;
}

Effects LaunchEnds::StepSignal(const LaunchState& l, const std::string& signal) {
  Effects fx = SignalStep{l.run_id, l.step.job_id, l.step.step_id, signal};
  for (const SlurmStep& s : l.pool_steps)
    fx.Add(SignalStep{l.run_id, s.job_id, s.step_id, signal});
  return fx;
}

Effects LaunchEnds::Fault(const LaunchFault& fault) {
  Effects fx;
  LaunchState* found = registry_.Find(fault.ref);
  if (found == nullptr || !found->Go()) return fx;
  LaunchState& l = *found;
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
    if (attempt.ok() && attempt->has_value() && !(*attempt)->slurm_job_id.empty())
      fx.Add(CancelJob{(*attempt)->slurm_job_id, "run " + l.run_id + "'s launch cannot go on"});
    return fx;
  }
  spdlog::warn("run {}: stopping launch {} (step {}.{}): {}", l.run_id, l.launch, l.step.job_id,
               l.step.step_id,
               fault.hang ? "rank " + std::to_string(fault.hang->rank) + " hung"
                          : "node(s) " + absl::StrJoin(fault.lost_nodes, ",") + " lost");
  // The workers stop their ranks on TERM (TERM, grace, KILL); a step still
  // there after kStopGrace is killed (a stopped or lost worker cannot act).
  fx += StepSignal(l, "TERM");
  l.stop_timer = true;
  fx.Add(StartTimer{{TimerKey::kStopGrace, l.Ref()}, kStopGrace});
  return fx;
}

Effects LaunchEnds::StopGraceOver(const LaunchRef& ref) {
  LaunchState* l = registry_.Find(ref);
  if (l == nullptr) return {};
  l->stop_timer = false;
  return StepSignal(*l, "KILL");
}

Effects LaunchEnds::Settle(LaunchState& l, const RunRecord& run, int step_exit_code,
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
  // A handoff stopped ranks only where a worker passed the signal on: ranks
  // that had all ended by then ended as they would have anyway.
  ev.handoff = l.handoff && l.time_limit_warned;
  ev.earlier_lone_kills = EarlierLoneKills(ctx_.store, ctx_.clock.Now());
  LaunchVerdict v = ClassifyLaunch(ev);

  auto spec = ctx_.ParseStoredSpec(run);
  RecoveryInput in;
  in.verdict = v;
  in.nodes_needed = l.needed_nodes;
  in.restarts_so_far = run.restarts;
  // The backoff's facts (recovery.h): this launch's GO, the run's others as stored.
  in.launch_started = l.started;
  if (auto past = ctx_.store.Launches(l.run_id); past.ok())
    for (const auto& p : *past) {
      if (p.attempt != l.attempt || p.launch != l.launch)
        in.earlier_launches.push_back({p.started, p.ended, ParseFailureClass(p.failure_class)});
      if (auto step = SetAsideStepOf(p)) in.set_aside_before.push_back(*step);
    }
  in.policy = spec.ok() ? spec->restart : spec::RestartSection{};
  in.now = ctx_.clock.Now();
  // Where the launch resumed from, and what it left (recovery.h, rule 3): a
  // continuation that would resume where this launch did made no progress;
  // a damaged checkpoint is the step it resumed from.
  if ((v.cls == FailureClass::kTimeLimit || v.cls == FailureClass::kHandoff ||
       v.cls == FailureClass::kDamagedCheckpoint) &&
      !l.go.checkpoint_dir.empty())
    in.progress = Progress{l.go.resume_step, NewestCompleteCheckpoint(l.go.checkpoint_dir)};
  // The allocation: every node whose worker registered for this launch (the
  // spares too), and the nodes it was planned on.
  std::set<std::string> allocation(l.planned.begin(), l.planned.end());
  for (const auto& r : l.registered) allocation.insert(r.node);
  in.allocation_nodes.assign(allocation.begin(), allocation.end());
  for (const auto& n : ev.lost_nodes) in.unhealthy.insert(n);
  // A worker that never reported may still have left its unstored records.
  for (const auto& n : ev.lost_nodes) fx.Add(StoreStepSpool{l.run_id, l.attempt, l.launch, n});
  for (const auto& n : ctx_.ExcludedNow()) in.unhealthy.insert(n);
  // The spare pool (recovery.h, rule 5): a standing pool job may join a
  // relaunch; the nodes of a pool job this attempt drew that has ended since
  // are gone.
  std::vector<PoolJobRecord> pools;
  if (auto rows = ctx_.store.PoolJobs(l.run_id); rows.ok()) pools = std::move(*rows);
  if (auto standing = StandingPoolOf(pools))
    in.pool = StandingPool{standing->job_id, PoolNodes(*standing)};
  for (const PoolJobRecord& p : pools)
    if (p.drawn_attempt == l.attempt && !p.live())
      for (const auto& n : PoolNodes(p)) in.unhealthy.insert(n);
  RecoveryDecision d = DecideRecovery(in);

  spdlog::info("run {} attempt {} launch {}: {} ({}){}; {}", l.run_id, l.attempt, l.launch,
               v.reason, FailureClassName(v.cls),
               v.blamed_node.empty() ? "" : ", blames " + v.blamed_node, RecoveryName(d.kind));
  LaunchRecord row;
  row.run_id = l.run_id;
  row.attempt = l.attempt;
  row.launch = l.launch;
  row.nodes = absl::StrJoin(l.go_nodes, ",");
  row.started = l.started;
  row.ended = in.now;
  row.failure_class = std::string(FailureClassName(v.cls));
  row.exit_code = v.exit_code;
  row.reason = v.reason;
  row.blamed_node = v.blamed_node;
  row.evidence_json = v.evidence_json;
  if (d.set_aside_step) {
    row.evidence_json = WithSetAsideStep(v.evidence_json, *d.set_aside_step);
    fx.Add(SetAsideCheckpoint{l.run_id, l.go.checkpoint_dir, *d.set_aside_step});
  }
  row.recovery = std::string(RecoveryName(d.kind));
  if (d.kind == RecoveryDecision::kRelaunch) row.next_nodes = absl::StrJoin(d.nodes, ",");
  // The pool job drawn is stored before the relaunch is: the relaunch's
  // answer, asked again after a restart, names its nodes by job from it.
  for (PoolJobRecord& p : pools) {
    if (d.draws_pool.empty() || p.job_id != d.draws_pool) continue;
    p.drawn_attempt = l.attempt;
    p.drawn_launch = l.launch + 1;
    fx.Add(RecordPoolJob{p});
    const std::string detail = "spare pool job " + std::to_string(p.pool) + " (Slurm job " +
                               p.job_id + ", " + p.nodelist + ") joins relaunch " +
                               std::to_string(l.attempt) + "." + std::to_string(l.launch + 1) +
                               ": too few healthy nodes in the allocation; another pool job " +
                               "refills the pool";
    spdlog::info("run {}: {}", l.run_id, detail);
    fx.Add(RecordHealthEvent{SparePoolEvent(p, l.attempt, l.launch + 1, in.now, detail,
                                            {{"event", "drawn"}, {"nodes", p.nodelist}})});
  }
  fx.Add(RecordLaunch{row});
  if (!v.blamed_node.empty())
    fx.Add(StrikeNode{v.blamed_node, v.reason, v.evidence_json,
                      "run " + l.run_id + " launch " + std::to_string(l.attempt) + "." +
                          std::to_string(l.launch)});

  answer->exit_code = v.exit_code;
  answer->reason = d.reason;
  std::string run_id = l.run_id;
  int attempt = l.attempt;
  WallTime now = in.now;
  switch (d.kind) {
    case RecoveryDecision::kSucceed:
      fx.Add(Transition{run_id, RunState::kSucceeded, v.reason, "{}",
                        {RecordAttemptEnd{run_id, attempt, 0, v.reason, now}}});
      break;
    case RecoveryDecision::kRelaunch: {
      int restarts = run.restarts + (d.uses_restart ? 1 : 0);
      fx.Add(Transition{run_id, RunState::kRestarting, d.reason, v.evidence_json,
                        {SetRestartBackoff{run_id, restarts, now}}});
      fx.Add(CountRestart{run_id, v.cls, /*relaunch=*/true});
      answer->relaunch = true;
      answer->next_launch = l.launch + 1;
      answer->exit_code = 0;
      SplitByJob(d.nodes, pools, l.attempt, answer);
      registry_.Plan({l.run_id, l.attempt, l.launch + 1}, d.nodes);
      break;
    }
    case RecoveryDecision::kNewAttempt:
    case RecoveryDecision::kFail:
      fx.Add(AttemptEnded{run_id, attempt, v.exit_code == 0 ? kExitError : v.exit_code, d.reason,
                          v.evidence_json, d, v.cls});
      break;
  }
  return fx;
}

// The batch script of an attempt waiting ahead (continuation.h) asks: its
// step ended before the attempt took over (a worker killed, the step refused,
// the job requeued). Only that attempt ends; the current one trains on, and
// another may wait ahead in its place (Continuations, at the next snapshot).
Effects LaunchEnds::WaitingStepEnded(const WorkerId& id, const AttemptRecord& attempt,
                                     int step_exit_code, ReplyTo<NextLaunchAnswer> reply) {
  Effects fx;
  const WallTime now = ctx_.clock.Now();
  const std::string why = "attempt " + std::to_string(attempt.attempt) + ", waiting ahead, " +
                          "lost its srun step (exit " + std::to_string(step_exit_code) +
                          ") before it took over; the current attempt trains on";
  spdlog::warn("run {}: {}", id.run_id, why);
  NextLaunchAnswer ans;
  ans.exit_code = step_exit_code == 0 ? kExitError : step_exit_code;
  ans.reason = why;
  fx.Add(RecordAttemptEnd{id.run_id, attempt.attempt, ans.exit_code, why, now});
  fx.Add(RecordHealthEvent{ContinuationEvent(
      id.run_id, attempt.attempt, id.launch, now, why,
      {{"event", "step_ended"}, {"step_exit_code", step_exit_code},
       {"slurm_job_id", attempt.slurm_job_id}})});
  // Its held workers still waiting for the gate (their step is gone) hear ABORT.
  if (LaunchState* held = registry_.Find(LaunchRegistry::RefOf(id))) {
    for (auto& w : held->waiting) fx.Add(Answer<GateAnswer>(w.reply, GateAnswer::Abort(why)));
    held->waiting.clear();
  }
  registry_.Forget(LaunchRegistry::RefOf(id), fx);
  fx.Add(Answer(reply, ans));
  return fx;
}

Effects LaunchEnds::NextLaunch(const WorkerId& id, const NextLaunchQuestion& q,
                               ReplyTo<NextLaunchAnswer> reply) {
  auto a = CheckWorker(ctx_.store, id);
  if (!a.ok()) return Answer<NextLaunchAnswer>(reply, a.status());
  auto run = ctx_.store.GetRun(id.run_id);
  if (!run.ok()) return Answer<NextLaunchAnswer>(reply, run.status());
  const int step_exit_code = q.step_exit_code;
  if (a->waiting && a->live() && !IsTerminal(run->state))
    return WaitingStepEnded(id, *a, step_exit_code, reply);
  Effects fx;
  NextLaunchAnswer ans;
  ans.exit_code = step_exit_code;
  bool live = !IsTerminal(run->state) && a->live();
  if (q.requeue_count > 0 || (q.terminated_by_slurm && live)) {
    fx = q.requeue_count > 0 ? requeue_.Requeued(id, *run, *a, q, &ans)
                             : requeue_.Terminated(id, *run, *a, step_exit_code, &ans);
    fx.Add(Answer(reply, ans));
    return fx;
  }
  const LaunchRef ref = LaunchRegistry::RefOf(id);
  LaunchState* l = registry_.Find(ref);
  if (l == nullptr) {
    // Asked again about a launch settled before (the answer lost on its way,
    // or the controller restarted since): the same answer, not a second one.
    auto rows = ctx_.store.Launches(id.run_id);
    if (!rows.ok()) return Answer<NextLaunchAnswer>(reply, rows.status());
    for (const LaunchRecord& row : *rows) {
      static const std::set<std::string> kSettled = {"relaunch", "succeed", "new_attempt", "fail"};
      if (row.attempt != id.attempt || row.launch != id.launch || !kSettled.count(row.recovery))
        continue;
      ans = AnswerSettledLaunch(row, run->state == RunState::kRestarting && a->live());
      if (ans.relaunch)
        if (auto pools = ctx_.store.PoolJobs(id.run_id); pools.ok())
          SplitByJob(std::vector<std::string>(ans.nodes), *pools, id.attempt, &ans);
      spdlog::info("run {} attempt {} launch {}: {}", id.run_id, id.attempt, id.launch, ans.reason);
      fx.Add(Answer(reply, ans));
      return fx;
    }
  }
  bool known = l != nullptr && l->Go();
  if (run->state == RunState::kRunning && a->live() && known) {
    // The batch script's word too: the workers' reports of the warning may
    // have been lost with a controller restarted since.
    l->time_limit_warned = l->time_limit_warned || q.time_limit_warned;
    fx += Settle(*l, *run, step_exit_code, &ans);
  } else if (run->state == RunState::kRunning && a->live()) {
    // After a controller restart the launch's reports are gone: srun's status decides.
    std::string run_id = id.run_id;
    int attempt = id.attempt;
    WallTime now = ctx_.clock.Now();
    if (step_exit_code == 0) {
      ans.reason = "srun step exited 0";
      fx.Add(Transition{run_id, RunState::kSucceeded, ans.reason, "{}",
                        {RecordAttemptEnd{run_id, attempt, 0, "srun step exited 0", now}}});
    } else {
      ans.reason = "srun step exited " + std::to_string(step_exit_code) +
                   " (the controller restarted during the launch: no rank reports)";
      fx.Add(AttemptEnded{run_id, attempt, step_exit_code, ans.reason,
                          "{\"step_exit_code\":" + std::to_string(step_exit_code) + "}",
                          std::nullopt, std::nullopt});
    }
  } else if (run->state == RunState::kRestarting && a->live() &&
             registry_.PlannedNodes(ref, ctx_.store)) {
    // A relaunch whose srun step ended before its workers registered (Slurm
    // refused the step, or the nodes died meanwhile): the attempt ends now.
    registry_.DropPlan(ref);
    ans.exit_code = step_exit_code == 0 ? kExitError : step_exit_code;
    ans.reason = "relaunch " + std::to_string(id.launch) + " did not start: srun step exited " +
                 std::to_string(step_exit_code);
    fx.Add(AttemptEnded{id.run_id, id.attempt, ans.exit_code, ans.reason,
                        "{\"step_exit_code\":" + std::to_string(step_exit_code) + "}",
                        std::nullopt, std::nullopt});
  } else {
    ans.reason = "run is " + std::string(StateName(run->state));
  }
  fx.Add(UnwatchLaunch{{id.run_id, id.attempt, id.launch}});
  registry_.Forget(ref, fx);
  fx.Add(Answer(reply, ans));
  return fx;
}

}  // namespace trellis::controller
