// Continuations ahead, at the gate (docs/architecture.md, "Continuations
// ahead"): the workers of an attempt waiting ahead register when Slurm starts
// its job, while the run's current attempt still trains. The gate judges them
// as any other, but holds them. Once they pass, the current launch is told to
// stop at its next step boundary with a checkpoint (SIGUSR1 to its srun step:
// the time limit's path, come early); its end is classified `handoff` and the
// scheduler takes the waiting attempt up (Scheduler::TakeUpWaiting), which
// lets the gate answer GO (TakenUp). Never two attempts training at once: the
// held workers start no rank before the current attempt has ended.
#include <nlohmann/json.hpp>

#include "common/exit_codes.h"
#include "common/log.h"
#include "controller/app/continuations.h"
#include "controller/app/launches.h"

namespace trellis::controller {

Effects LaunchGate::HeldGateDecided(LaunchState* held, const GateOutcome& out) {
  Effects fx;
  LaunchState& l = *held;
  if (out.kind == GateOutcome::kGo) {
    if (l.ready) return fx;
    l.ready = true;
    if (l.gate_timer) fx.Add(CancelTimer{{TimerKey::kGateTimeout, l.Ref()}});
    l.gate_timer = false;
    spdlog::info("run {}: attempt {}, waiting ahead, passed the gate ({}): handing over", l.run_id,
                 l.attempt, out.reason);
    return HandOver(l);
  }
  // Its nodes cannot take over: the waiting attempt is given up, its failing
  // nodes struck (so the next one waiting ahead avoids them), and the
  // current attempt trains on undisturbed.
  l.outcome = out;
  if (l.gate_timer) fx.Add(CancelTimer{{TimerKey::kGateTimeout, l.Ref()}});
  l.gate_timer = false;
  fx.Add(GateRecord(l, out));
  for (const auto& v : out.verdicts) {
    if (v.passed) continue;
    std::string reason;
    for (const auto& r : v.reasons) reason += (reason.empty() ? "" : "; ") + r;
    fx.Add(StrikeNode{v.node, reason, "{}", "gate (run " + l.run_id + ", waiting ahead)",
                      /*until_released=*/false});
  }
  fx += AnswerWaiting(&l);
  const WallTime now = ctx_.clock.Now();
  const std::string why = "attempt " + std::to_string(l.attempt) +
                          ", waiting ahead, failed the gate: " + out.reason +
                          "; the current attempt trains on and another waits ahead in its place";
  spdlog::warn("run {}: {}", l.run_id, why);
  fx.Add(RecordAttemptEnd{l.run_id, l.attempt, kExitGateAbort, why, now});
  fx.Add(RecordHealthEvent{ContinuationEvent(l.run_id, l.attempt, l.launch, now, why, {{"event", "gate_aborted"}})});
  if (!l.slurm_job_id.empty())
    fx.Add(CancelJob{l.slurm_job_id, "the gate refused run " + l.run_id + "'s waiting attempt"});
  return fx;
}

Effects LaunchGate::HandOver(const LaunchState& held) {
  Effects fx;
  for (LaunchState* current : registry_.OfRun(held.run_id)) {
    LaunchState& c = *current;
    if (c.attempt == held.attempt || c.held || !c.Go() || c.handoff) continue;
    c.handoff = true;
    const std::string detail =
        "handoff: attempt " + std::to_string(held.attempt) + " passed the gate on " +
        std::to_string(held.registered.size()) + " node(s); launch " +
        std::to_string(c.attempt) + "." + std::to_string(c.launch) +
        " stops at its next step boundary with a checkpoint";
    spdlog::info("run {}: {}", c.run_id, detail);
    fx.Add(RecordHealthEvent{ContinuationEvent(held.run_id, held.attempt, held.launch, ctx_.clock.Now(), detail,
                                          {{"event", "handoff"},
                                           {"from_attempt", c.attempt},
                                           {"from_launch", c.launch}})});
    if (c.step.step_id.empty()) {
      // No step to signal (a worker too old to say): the time limit will do.
      spdlog::warn("run {}: launch {}.{} has no known srun step to stop; the handoff waits for "
                   "its time limit",
                   c.run_id, c.attempt, c.launch);
      return fx;
    }
    // The time limit's signal: each worker passes it to its ranks, which
    // stop together at a step boundary, checkpoint and exit 0.
    fx += LaunchEnds::StepSignal(c, "USR1");
    return fx;
  }
  return fx;  // nothing runs now (a relaunch gating): at its GO
}

Effects LaunchGate::HandOverIfReady(const std::string& run_id) {
  for (LaunchState* l : registry_.OfRun(run_id))
    if (l->held && l->ready) return HandOver(*l);
  return {};
}

Effects LaunchGate::TakenUp(const AttemptTakenUp& taken) {
  Effects fx;
  for (LaunchState* launch : registry_.OfRun(taken.run_id, taken.attempt)) {
    LaunchState& l = *launch;
    if (!l.held) continue;
    l.held = false;
    if (l.outcome || l.registered.empty()) continue;
    std::string progress = "attempt " + std::to_string(l.attempt) + " takes over: " +
                           std::to_string(l.registered.size()) + " of " +
                           std::to_string(l.expected_nodes) +
                           " node(s) registered while it waited ahead";
    fx.Add(Transition{l.run_id, RunState::kGating, progress});
    if (!l.ready && !l.gate_timer && !l.gate_timed_out) {
      l.gate_timer = true;
      fx.Add(StartTimer{{TimerKey::kGateTimeout, l.Ref()}, l.policy.timeout});
    }
    fx += EvaluateGate(&l, l.gate_timed_out);
  }
  return fx;
}

}  // namespace trellis::controller
