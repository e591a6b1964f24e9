// The scheduler's part in continuations ahead (docs/architecture.md,
// "Continuations ahead"): the next attempt submitted to wait in Slurm's queue,
// taken up as the run's new attempt when one is needed, and given up when the
// run ends.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/str_split.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "controller/app/continuations.h"
#include "controller/app/scheduler.h"

namespace trellis::controller {

Effects Scheduler::QueueAhead(const QueueAheadOf& ask) {
  auto run = ctx_.store.GetRun(ask.run_id);
  if (!run.ok() || run->state != RunState::kRunning || submitting_.count(ask.run_id)) return {};
  auto spec = ctx_.ParseStoredSpec(*run);
  auto all = ctx_.store.Attempts(ask.run_id);
  if (!spec.ok() || !all.ok()) return {};
  AttemptPlan plan;
  plan.begin_in = ask.begin_in;
  plan.attempt = NextAttemptNumber(*all);
  if (auto w = WaitingAttemptOf(*all)) {
    if (!w->slurm_job_id.empty()) return {};  // it waits already
    // Stored before its sbatch answered (sbatch failed, or the controller
    // stopped): submitted again under its number, after a look for its name.
    plan.attempt = w->attempt;
    plan.resumed = *w;
  }
  spdlog::info("run {}: attempt {} to wait ahead, {}", ask.run_id, plan.attempt, ask.why);
  waiting_why_[ask.run_id] = ask.why;
  return PrepareAttempt(*run, *spec, ctx_.ExcludedNow(), plan);
}

Effects Scheduler::OnWaitingSubmitted(const JobSubmitted& out) {
  const std::string& run_id = out.run_id;
  const WallTime now = ctx_.clock.Now();
  std::string why = waiting_why_[run_id];
  waiting_why_.erase(run_id);
  Effects fx;
  if (!out.job.ok()) {
    std::string error(out.job.status().message());
    if (error.find("Batch job submission failed") == std::string::npos) {
      // Stored without its job id: the next look submits it again.
      spdlog::warn("run {}: sbatch of attempt {} (to wait ahead) failed, retrying: {}", run_id,
                   out.attempt, error);
      return fx;
    }
    std::string reason = "sbatch refused attempt " + std::to_string(out.attempt) +
                         " (to wait ahead): " + error +
                         "; the run's continuation follows the current attempt's end instead";
    fx.Add(RecordAttemptEnd{run_id, out.attempt, 1, reason, now});
    fx.Add(RecordHealthEvent{ContinuationEvent(run_id, out.attempt, 0, now, reason)});
    return fx;
  }
  const std::string& job = *out.job;
  auto run = ctx_.store.GetRun(run_id);
  auto all = ctx_.store.Attempts(run_id);
  std::optional<AttemptRecord> row;
  if (all.ok())
    for (const auto& a : *all)
      if (a.attempt == out.attempt) row = a;
  fx.Add(RecordAttemptJob{run_id, out.attempt, job});
  if (!run.ok() || IsTerminal(run->state) || !row || !row->live()) {
    // The run ended, or went on without it, while its sbatch was in flight.
    if (row && row->live())
      fx.Add(RecordAttemptEnd{run_id, out.attempt, kExitCancelled,
                              "not needed: the run went on without it", now});
    fx.Add(CancelJob{job, "run " + run_id + " no longer needs attempt " +
                              std::to_string(out.attempt)});
    return fx;
  }
  std::string detail = "attempt " + std::to_string(out.attempt) + " waits ahead as Slurm job " +
                       job + (out.adopted.empty() ? "" : " (found by name after a restart)") +
                       (why.empty() ? "" : ", " + why);
  spdlog::info("run {}: {}", run_id, detail);
  fx.Add(RecordHealthEvent{ContinuationEvent(run_id, out.attempt, 0, now, detail,
                                             {{"slurm_job_id", job}, {"event", "queued"}})});
  return fx;
}

Effects Scheduler::TakeUpWaiting(const RunRecord& run, const AttemptEnded& end,
                                 const RecoveryDecision& d, const AttemptRecord& waiting) {
  Effects fx;
  const std::string& run_id = run.run_id;
  const WallTime now = ctx_.clock.Now();
  const int restarts = run.restarts + (d.uses_restart ? 1 : 0);
  const std::string reason = d.reason + ": attempt " + std::to_string(waiting.attempt) +
                             " (Slurm job " + waiting.slurm_job_id +
                             "), waiting ahead, takes over";
  // A handoff's job runs already. Otherwise it is made eligible when the run
  // may go on (now, or after a failure's backoff), and kept off the nodes
  // struck since it was submitted.
  std::optional<ReleaseJob> release;
  if (end.failure_class != FailureClass::kHandoff) {
    const WallTime start = std::max(now, d.not_before);
    std::vector<std::string> exclude = ctx_.ExcludedNow();
    std::sort(exclude.begin(), exclude.end());
    std::vector<std::string> was = ExcludedBy(waiting.sbatch_args);
    std::sort(was.begin(), was.end());
    if ((waiting.begin && *waiting.begin > start) || exclude != was)
      release = ReleaseJob{run_id, waiting.slurm_job_id,
                           std::chrono::duration_cast<std::chrono::seconds>(start - now),
                           exclude};
  }
  RecordAttemptEnd end_attempt{run_id, end.attempt, end.exit_code, end.why, now};
  std::vector<StoreWrite> take_up = {
      TakeUpAttempt{run_id, waiting.attempt,
                    release ? std::optional<WallTime>(now + release->start_in) : std::nullopt},
      SetRestartBackoff{run_id, restarts, d.not_before}};
  if (run.state != RunState::kRestarting) {
    Transition t{run_id, RunState::kRestarting, end.why, end.evidence_json, {end_attempt}};
    t.next = Transition::Next{RunState::kSubmitted, reason, std::move(take_up)};
    fx.Add(std::move(t));
  } else {
    Transition t{run_id, RunState::kSubmitted, reason, end.evidence_json, {end_attempt}};
    for (auto& w : take_up) t.also.push_back(std::move(w));
    fx.Add(std::move(t));
  }
  fx.Add(AttemptTakenUp{run_id, waiting.attempt});
  if (release) fx.Add(std::move(*release));
  return fx;
}

Effects Scheduler::RunEnded(const std::string& run_id) {
  auto all = ctx_.store.Attempts(run_id);
  if (!all.ok()) return {};
  auto w = WaitingAttemptOf(*all);
  if (!w) return {};
  Effects fx = RecordAttemptEnd{run_id, w->attempt, kExitCancelled,
                                "not needed: the run ended before it", ctx_.clock.Now()};
  // Workers of its job that registered meanwhile are told to go.
  fx.Add(EndLaunchesOfRun{run_id, "the run ended: its attempt waiting ahead is not needed",
                          w->attempt});
  if (!w->slurm_job_id.empty())
    fx.Add(CancelJob{w->slurm_job_id, "run " + run_id + " ended: attempt " +
                                          std::to_string(w->attempt) + " waiting ahead is not needed"});
  spdlog::info("run {}: attempt {} waiting ahead{} is not needed: cancelled", run_id, w->attempt,
               w->slurm_job_id.empty() ? "" : " (Slurm job " + w->slurm_job_id + ")");
  return fx;
}

}  // namespace trellis::controller
