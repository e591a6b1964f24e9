#include "controller/app/reconciler.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/checkpoint_layout.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "controller/app/continuations.h"
#include "controller/app/launch_answers.h"

namespace trellis::controller {

std::optional<ExitFile> Reconciler::ReadExitFile(const RunRecord& run, int attempt) const {
  std::ifstream in(run.run_dir + "/attempt-" + std::to_string(attempt) + "/exit.json");
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (!j.is_object() || !j.contains("exit_code") || !j["exit_code"].is_number_integer()) {
    spdlog::warn("run {}: attempt {} exit.json is malformed; ignoring it", run.run_id, attempt);
    return std::nullopt;
  }
  ExitFile f;
  f.exit_code = j["exit_code"].get<int>();
  if (j.contains("last_launch") && j["last_launch"].is_number_integer())
    f.last_launch = j["last_launch"].get<int>();
  if (j.contains("reason") && j["reason"].is_string()) f.reason = j["reason"].get<std::string>();
  if (j.contains("restarts") && j["restarts"].is_number_integer())
    f.restarts = j["restarts"].get<int>();
  return f;
}

Effects Reconciler::Tick(bool startup) {
  if (in_flight_) return {};
  auto runs = ctx_.store.ListRuns(10000, /*active_only=*/true);
  if (!runs.ok()) {
    spdlog::error("reconcile: {}", std::string(runs.status().message()));
    return {};
  }
  std::vector<std::string> job_ids;
  for (const auto& r : *runs) {
    auto a = ctx_.store.LatestAttempt(r.run_id);
    if (a.ok() && a->has_value() && (*a)->live() && !(*a)->slurm_job_id.empty())
      job_ids.push_back((*a)->slurm_job_id);
    auto all = ctx_.store.Attempts(r.run_id);
    auto waiting = all.ok() ? WaitingAttemptOf(*all) : std::nullopt;
    if (waiting && !waiting->slurm_job_id.empty()) job_ids.push_back(waiting->slurm_job_id);
  }
  // Spare pool jobs (SparePools), of ended runs too: they are cancelled from here.
  if (auto pools = ctx_.store.PoolJobs(""); pools.ok())
    for (const PoolJobRecord& p : *pools)
      if (!p.job_id.empty()) job_ids.push_back(p.job_id);
  if (job_ids.empty()) return {};
  in_flight_ = true;
  return QueryJobs{std::move(job_ids), startup};
}

Effects Reconciler::OnSnapshot(const JobsSeen& seen) {
  const auto& listed = seen.listed;
  const auto& shown = seen.shown;
  const bool startup = seen.startup;
  in_flight_ = false;
  Effects fx;
  if (!listed.ok()) {
    spdlog::warn("reconcile: squeue: {}", std::string(listed.status().message()));
    return fx;
  }
  auto runs = ctx_.store.ListRuns(10000, true);
  if (!runs.ok()) {
    spdlog::error("reconcile: {}", std::string(runs.status().message()));
    return fx;
  }
  for (const auto& run : *runs) {
    fx += WaitingJobGone(run, seen);
    auto a = ctx_.store.LatestAttempt(run.run_id);
    if (!a.ok() || !a->has_value() || !(*a)->live() || (*a)->slurm_job_id.empty()) continue;
    const AttemptRecord& attempt = **a;
    std::optional<SlurmJob> job;
    for (const auto& j : *listed)
      if (j.id == attempt.slurm_job_id) job = j;
    if (!job) {
      auto it = shown.find(attempt.slurm_job_id);
      if (it == shown.end()) continue;  // submitted after the snapshot
      if (!it->second.ok()) {
        spdlog::warn("reconcile: job {}: {}", attempt.slurm_job_id,
                     std::string(it->second.status().message()));
        continue;
      }
      job = *it->second;
    }
    if (job && RequeuedBySlurm(run.state, *job)) {  // none: vanished, below
      fx += Requeued(run, attempt, *job);
      continue;
    }
    if (job && run.state == RunState::kSubmitted && job->state == SlurmJobState::kPending) {
      fx += PendingForGood(run, attempt, *job);
      continue;
    }
    if (job) pending_.erase(job->id);
    Reconciliation r = Reconcile(job, ReadExitFile(run, attempt.attempt));
    if (!r.nodelist.empty() && attempt.nodelist.empty()) {
      fx.Add(RecordAttemptNodes{run.run_id, attempt.attempt, r.nodelist});
    }
    if (r.kind == Reconciliation::kEnded) {
      if (startup)
        spdlog::info("run {}: job {} ended while the controller was down", run.run_id,
                     attempt.slurm_job_id);
      fx += SettleEnded(run, attempt, r);
    }
  }
  return fx;
}

Effects Reconciler::PendingForGood(const RunRecord& run, const AttemptRecord& attempt,
                                   const SlurmJob& job) {
  const std::string means = NeverStartsWhile(job.reason);
  if (means.empty()) {
    pending_.erase(job.id);
    return {};
  }
  const WallTime now = ctx_.clock.Now();
  Pending& p = pending_[job.id];
  if (p.reason != job.reason) p = {job.reason, now};
  const auto limit = ctx_.config.unschedulable_after;
  const std::string said = "Slurm keeps job " + job.id + " pending: " + job.reason + " (" +
                           means + ")";
  Effects fx;
  if (limit.count() > 0 && now - p.since >= limit) {
    const std::string why = said + " for " + std::to_string(limit.count()) +
                            " s (--unschedulable-after-s): it would not start";
    pending_.erase(job.id);
    fx.Add(CancelJob{job.id, "run " + run.run_id + ": " + why});
    Transition t{run.run_id, RunState::kRestarting, why, "{}",
                 {RecordAttemptEnd{run.run_id, attempt.attempt, kExitDoNotRetry, why, now}}};
    t.next = Transition::Next{RunState::kFailed, why, {}};
    fx.Add(std::move(t));
    return fx;
  }
  const std::string reason =
      said + (limit.count() > 0 ? "; the run fails if it stays so for " +
                                      std::to_string(limit.count()) + " s"
                                : "");
  if (run.state_reason != reason) fx.Add(SetWaitReason{run.run_id, reason});
  return fx;
}

Effects Reconciler::WaitingJobGone(const RunRecord& run, const JobsSeen& seen) {
  auto all = ctx_.store.Attempts(run.run_id);
  auto w = all.ok() ? WaitingAttemptOf(*all) : std::nullopt;
  if (!w || w->slurm_job_id.empty()) return {};
  for (const auto& j : *seen.listed)
    if (j.id == w->slurm_job_id) return {};
  auto it = seen.shown.find(w->slurm_job_id);
  if (it == seen.shown.end() || !it->second.ok()) return {};  // submitted after, or unknown
  if (it->second->has_value() && !(*it->second)->state.terminal()) return {};
  // Cancelled by someone, refused or failed by Slurm before it was needed:
  // the run trains on, and another waits ahead after the next snapshot.
  std::string state = it->second->has_value() ? (*it->second)->state.name() : "forgotten";
  std::string reason = "Slurm job " + w->slurm_job_id + " of attempt " +
                       std::to_string(w->attempt) + ", waiting ahead, ended before it was " +
                       "needed (" + state + "); another is queued in its place";
  spdlog::warn("run {}: {}", run.run_id, reason);
  const WallTime now = ctx_.clock.Now();
  Effects fx = RecordAttemptEnd{run.run_id, w->attempt, 1, reason, now};
  fx.Add(RecordHealthEvent{ContinuationEvent(
      run.run_id, w->attempt, 0, now, reason,
      {{"slurm_job_id", w->slurm_job_id}, {"event", "ended"}, {"state", state}})});
  return fx;
}

Effects Reconciler::Requeued(const RunRecord& run, const AttemptRecord& attempt,
                             const SlurmJob& job) {
  Effects fx;
  std::string reason = "Slurm requeued job " + attempt.slurm_job_id + ": pending again (" +
                       job.reason + "); its batch script starts over and is gated again";
  spdlog::info("run {}: {}", run.run_id, reason);
  fx.Add(EndLaunchesOfRun{run.run_id, "Slurm requeued the job", attempt.attempt});
  fx.Add(Transition{run.run_id, RunState::kSubmitted, reason});
  return fx;
}

std::optional<Progress> Reconciler::ProgressOf(const RunRecord& run,
                                               const AttemptRecord& attempt) {
  auto launches = ctx_.store.Launches(run.run_id);
  if (!launches.ok()) return std::nullopt;
  for (auto it = launches->rbegin(); it != launches->rend(); ++it) {
    if (it->attempt != attempt.attempt || it->go_json.empty()) continue;
    auto go = GoRecordFromJson(it->go_json);
    if (!go.ok() || go->go.checkpoint_dir.empty()) return std::nullopt;
    return Progress{go->go.resume_step, NewestCompleteCheckpoint(go->go.checkpoint_dir)};
  }
  return std::nullopt;
}

Effects Reconciler::SettleEnded(const RunRecord& run, const AttemptRecord& attempt,
                                const Reconciliation& r) {
  Effects fx;
  std::string evidence = "{\"slurm_job_id\":\"" + attempt.slurm_job_id +
                         "\",\"exit_code\":" + std::to_string(r.exit_code) + "}";
  fx.Add(EndLaunchesOfRun{run.run_id, "Slurm job ended", attempt.attempt});
  if (r.succeeded && run.state == RunState::kRunning) {
    fx.Add(Transition{run.run_id, RunState::kSucceeded, r.reason, evidence,
                      {RecordAttemptEnd{run.run_id, attempt.attempt, 0, r.reason,
                                        ctx_.clock.Now()}}});
    return fx;
  }
  std::string why = r.succeeded ? "Slurm job ended before the run started: " + r.reason : r.reason;
  std::optional<RecoveryDecision> decided;
  std::optional<Progress> progress =
      r.stopped_by == FailureClass::kTimeLimit ? ProgressOf(run, attempt) : std::nullopt;
  if (progress && !progress->Made()) {
    // As the launch path decides (recovery.h, rule 3's exception): a time
    // limit that left nothing newer than where its launch resumed would
    // redo the same steps; the restart budget decides, as for a failure.
    why += ", with no checkpoint newer than " +
           (progress->resumed_from < 0 ? std::string("the start")
                                       : "step " + std::to_string(progress->resumed_from)) +
           " its launch resumed from (a continuation would redo the same steps)";
  } else if (r.stopped_by) {
    // Unseen by the launch path (the controller was down, or the ranks did
    // not end before the limit): a continuation all the same.
    decided = RecoveryDecision{RecoveryDecision::kNewAttempt, {}, ctx_.clock.Now(), false,
                               std::string(FailureClassName(*r.stopped_by)) +
                                   ": a new attempt continues from the newest checkpoint"};
  }
  fx.Add(AttemptEnded{run.run_id, attempt.attempt, r.succeeded ? 1 : r.exit_code, why,
                      evidence, decided, r.stopped_by});
  return fx;
}

}  // namespace trellis::controller
