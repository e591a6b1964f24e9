// The scheduler's sbatch of an attempt (docs/architecture.md, "A run's
// life"): its files written, the attempt stored, then submitted; a job Slurm
// took but the store did not is cancelled.
#include <nlohmann/json.hpp>

#include "common/auth.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "common/sha256.h"
#include "controller/app/scheduler.h"
#include "controller/core/batch_script.h"

namespace trellis::controller {

Effects Scheduler::SubmitAttempt(const RunRecord& run, const spec::RunSpec& spec,
                                 const std::vector<std::string>& excluded) {
  Effects fx;
  auto latest = ctx_.store.LatestAttempt(run.run_id);
  if (!latest.ok()) {
    spdlog::error("run {}: attempts unreadable: {}", run.run_id,
                  std::string(latest.status().message()));
    return fx;
  }
  // Written ahead: an attempt is stored (no job id yet) before its sbatch
  // runs. One still without a job id was being submitted when sbatch failed
  // or the controller stopped: it is submitted again under its own number,
  // after a look for a job of its name (docs/architecture.md, "A run's life").
  const bool resume = latest->has_value() && (*latest)->live() && (*latest)->slurm_job_id.empty();
  auto all = ctx_.store.Attempts(run.run_id);
  if (!all.ok()) return fx;
  AttemptPlan plan;
  plan.attempt = resume ? (*latest)->attempt : NextAttemptNumber(*all);
  if (resume) plan.resumed = *latest;
  return PrepareAttempt(run, spec, excluded, plan);
}

Effects Scheduler::PrepareAttempt(const RunRecord& run, const spec::RunSpec& spec,
                                  const std::vector<std::string>& excluded,
                                  const AttemptPlan& plan) {
  Effects fx;
  const bool resume = plan.resumed.has_value();
  const int attempt = plan.attempt;
  std::string attempt_dir = run.run_dir + "/attempt-" + std::to_string(attempt);
  AttemptPaths paths{run.run_id, attempt, run.run_dir, ctx_.config.worker_bin,
                     ctx_.config.advertise_addr, attempt_dir + "/secret", /*job_tag=*/"",
                     ctx_.config.worker_tls_ca, ctx_.config.controller_file};
  // Resumed: the secret file written before is kept (a job submitted before
  // a stop may be running with it); the store has only its digest, which
  // the shell checks the file against.
  const std::string secret = resume ? "" : auth::RandomSecretHex();
  const std::string secret_sha256 = resume ? plan.resumed->secret_sha256 : Sha256Hex(secret);
  paths.job_tag = secret_sha256.substr(0, 8);
  auto script = RenderBatchScript(ctx_.config.sbatch_template, paths);
  if (!script.ok()) {
    fx.Add(Transition{run.run_id, RunState::kFailed,
                      "cannot prepare attempt: " + std::string(script.status().message())});
    return fx;
  }
  WriteAttemptFiles files{run.run_id, attempt, attempt_dir, {}, "", ""};
  files.files.push_back({run.run_dir + "/spec.toml", run.spec_toml, 0600});
  if (resume) {
    files.kept_secret_file = paths.secret_file;
    files.kept_secret_sha256 = secret_sha256;
  } else {
    files.files.push_back({paths.secret_file, secret + "\n", 0600});
  }
  files.files.push_back({attempt_dir + "/batch.sh", *script, 0700});
  PendingAttempt pending;
  pending.submit = SubmitJob{run.run_id, attempt,
                             AttemptJobName(run.run_id, attempt, paths.job_tag),
                             SbatchArgs(spec, paths, excluded), attempt_dir + "/batch.sh"};
  const WallTime now = ctx_.clock.Now();
  if (plan.begin_in) {
    // Waiting ahead: Slurm may start it only from then. A resumed one keeps
    // its first eligibility (its queue wait counts from there).
    const auto begin = resume && plan.resumed->begin ? *plan.resumed->begin : now + *plan.begin_in;
    const auto in = std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::seconds>(begin - now).count());
    pending.submit.args.push_back("--begin=now+" + std::to_string(in));
    pending.waiting = true;
  }
  if (!resume) {
    AttemptRecord a;
    a.run_id = run.run_id;
    a.attempt = attempt;
    a.sbatch_args = pending.submit.args;
    a.secret_sha256 = secret_sha256;
    a.submitted = now;
    a.waiting = plan.begin_in.has_value();
    if (plan.begin_in) a.begin = now + *plan.begin_in;
    pending.record = std::move(a);
  }
  submitting_.insert(run.run_id);
  pending_[run.run_id] = std::move(pending);
  fx.Add(std::move(files));
  return fx;
}

Effects Scheduler::SubmitPending(const std::string& run_id, int attempt) {
  auto it = pending_.find(run_id);
  if (it == pending_.end()) return {};
  Effects fx;
  if (it->second.waiting)  // the run trains meanwhile: its reason stays
    waiting_sbatch_.insert(run_id);
  else
    fx.Add(SetWaitReason{run_id, "submitting attempt " + std::to_string(attempt)});
  fx.Add(std::move(it->second.submit));
  pending_.erase(it);
  return fx;
}

void Scheduler::DropPending(const std::string& run_id) {
  pending_.erase(run_id);
  submitting_.erase(run_id);
}

Effects Scheduler::OnAttemptFilesWritten(const AttemptFilesWritten& written) {
  auto it = pending_.find(written.run_id);
  if (it == pending_.end()) return {};
  Effects fx;
  if (!written.status.ok() && it->second.waiting) {
    // The run trains on; its continuation comes after it instead.
    spdlog::error("run {}: attempt {} not submitted ahead: {}", written.run_id, written.attempt,
                  std::string(written.status.message()));
    DropPending(written.run_id);
    return fx;
  }
  if (!written.status.ok()) {
    DropPending(written.run_id);
    std::string why(written.status.message());
    // A kept secret that is gone or altered is said as is: the attempt's job
    // cannot be trusted with another.
    if (!absl::IsFailedPrecondition(written.status)) why = "cannot prepare attempt: " + why;
    spdlog::error("run {}: attempt {} not submitted: {}", written.run_id, written.attempt, why);
    fx.Add(Transition{written.run_id, RunState::kFailed, why});
    return fx;
  }
  std::optional<AttemptRecord>& record = it->second.record;
  if (!record) return SubmitPending(written.run_id, written.attempt);  // resumed: stored before
  fx.Add(CreateAttempt{std::move(*record)});
  record.reset();
  return fx;
}

Effects Scheduler::OnAttemptCreated(const AttemptCreated& created) {
  if (!pending_.count(created.run_id)) return {};
  if (!created.status.ok()) {
    spdlog::error("run {}: attempt {} not stored, not submitted: {}", created.run_id,
                  created.attempt, std::string(created.status.message()));
    DropPending(created.run_id);
    return {};
  }
  return SubmitPending(created.run_id, created.attempt);
}

Effects Scheduler::OnSubmitted(const JobSubmitted& out) {
  const std::string& run_id = out.run_id;
  const int attempt = out.attempt;
  submitting_.erase(run_id);
  if (waiting_sbatch_.erase(run_id)) return OnWaitingSubmitted(out);
  Effects fx;
  const absl::StatusOr<std::string>& job_id = out.job;
  if (!job_id.ok()) {
    std::string why = std::string(job_id.status().message());
    // sbatch refusing the job is final (bad partition, account, node count);
    // anything else (controller unreachable, timeout) is retried next tick
    // (the attempt stays stored without a job id).
    if (why.find("Batch job submission failed") != std::string::npos) {
      std::string reason = "sbatch refused the job: " + why;
      Transition t{run_id, RunState::kFailed, reason};
      t.also.push_back(RecordAttemptEnd{run_id, attempt, 1, reason, ctx_.clock.Now()});
      fx.Add(std::move(t));
    } else {
      fx.Add(SetWaitReason{run_id, "sbatch failed, retrying: " + why});
    }
    return fx;
  }
  std::string job = *job_id;
  if (!out.adopted.empty())
    spdlog::warn("run {}: attempt {} already had Slurm job {} (submitted before a controller "
                 "restart): adopted{}",
                 run_id, attempt, job,
                 out.cancelled.empty() ? "" : "; cancelled " + std::to_string(out.cancelled.size()) +
                                                  " more of its name");
  nlohmann::json evidence = {{"slurm_job_id", job}};
  if (!out.adopted.empty()) evidence["adopted"] = true;
  if (!out.cancelled.empty()) evidence["cancelled_duplicates"] = out.cancelled;
  Transition t{run_id, RunState::kSubmitted,
               "attempt " + std::to_string(attempt) + " is Slurm job " + job +
                   (out.adopted.empty() ? "" : " (found by name after a restart)"),
               evidence.dump()};
  t.also.push_back(RecordAttemptJob{run_id, attempt, job});
  t.records_job = SubmittedJob{run_id, attempt, job};
  fx.Add(std::move(t));
  return fx;
}

Effects Scheduler::OnJobRecorded(const JobRecorded& recorded) {
  if (recorded.status.ok()) return {};
  // Cancelled meanwhile (or the store failed): do not leave the job behind.
  const SubmittedJob& j = recorded.job;
  Effects undo = RecordAttemptJob{j.run_id, j.attempt, j.job_id};
  undo.Add(RecordAttemptEnd{j.run_id, j.attempt, 1, "the run ended while it was submitted",
                            ctx_.clock.Now()});
  undo.Add(CancelJob{j.job_id, "an attempt not recorded"});
  return undo;
}

}  // namespace trellis::controller
