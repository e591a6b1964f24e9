#include "controller/app/continuations.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/log.h"

namespace trellis::controller {

namespace {

std::string PartitionOf(const AttemptRecord& a) {
  for (const auto& arg : a.sbatch_args)
    if (arg.rfind("--partition=", 0) == 0) return arg.substr(12);
  return "";
}

}  // namespace

std::vector<std::chrono::seconds> Continuations::QueueWaits(const std::string& partition) {
  if (!history_) {
    history_.emplace();
    auto runs = ctx_.store.ListRuns(kQueueWaitRuns, /*active_only=*/false);
    if (runs.ok())
      for (const RunRecord& run : *runs) {
        auto attempts = ctx_.store.Attempts(run.run_id);
        auto launches = ctx_.store.Launches(run.run_id);
        if (!attempts.ok() || !launches.ok()) continue;
        for (const AttemptRecord& a : *attempts) {
          if (a.slurm_job_id.empty()) continue;
          AttemptQueueFacts f;
          f.partition = PartitionOf(a);
          f.eligible = a.begin ? std::max(*a.begin, a.submitted) : a.submitted;
          // Its first GO: a handoff's stop of the attempt before is included.
          for (const LaunchRecord& l : *launches)
            if (l.attempt == a.attempt && (!f.started || l.started < *f.started))
              f.started = l.started;
          history_->push_back(std::move(f));
        }
      }
  }
  return QueueWaitsOn(*history_, partition);
}

HealthEventRecord RunEvent(std::string kind, const std::string& run_id, int attempt, int launch,
                           WallTime now, std::string detail, const nlohmann::json& j) {
  HealthEventRecord e;
  e.run_id = run_id;
  e.attempt = attempt;
  e.launch = launch;
  e.time = now;
  e.kind = std::move(kind);
  e.detail = std::move(detail);
  e.detail_json = j.dump();
  return e;
}

HealthEventRecord ContinuationEvent(const std::string& run_id, int attempt, int launch,
                                    WallTime now, std::string detail, const nlohmann::json& j) {
  return RunEvent(kContinuationEvent, run_id, attempt, launch, now, std::move(detail), j);
}

std::vector<std::string> ExcludedBy(const std::vector<std::string>& sbatch_args) {
  std::vector<std::string> out;
  for (const auto& a : sbatch_args)
    if (a.rfind("--exclude=", 0) == 0) out = absl::StrSplit(a.substr(10), ',');
  return out;
}

// A waiting job kept its submission's --exclude: a node struck since would be
// in its allocation when it starts, fail its gate and give the waiting
// attempt up. While Slurm still holds it pending, it is kept off the nodes
// excluded now (`scontrol update`, its StartTime unchanged); once per change.
Effects Continuations::KeepOffStruckNodes(const std::string& run_id, const AttemptRecord& waiting,
                                          const std::vector<SlurmJob>& listed) {
  auto job = std::find_if(listed.begin(), listed.end(),
                          [&](const SlurmJob& j) { return j.id == waiting.slurm_job_id; });
  if (job == listed.end() || job->state.base() != SlurmJobState::kPending) return {};
  std::vector<std::string> now_excluded = ctx_.ExcludedNow();
  std::sort(now_excluded.begin(), now_excluded.end());
  auto sent = exclude_sent_.find(waiting.slurm_job_id);
  std::vector<std::string> was =
      sent != exclude_sent_.end() ? sent->second : ExcludedBy(waiting.sbatch_args);
  std::sort(was.begin(), was.end());
  if (now_excluded == was) return {};
  exclude_sent_[waiting.slurm_job_id] = now_excluded;
  const WallTime now = ctx_.clock.Now();
  const auto start_in = waiting.begin && *waiting.begin > now
                            ? std::chrono::ceil<std::chrono::seconds>(*waiting.begin - now)
                            : std::chrono::seconds(0);
  spdlog::info("run {}: waiting job {} kept off the nodes excluded now: {}", run_id,
               waiting.slurm_job_id, absl::StrJoin(now_excluded, ","));
  return ReleaseJob{run_id, waiting.slurm_job_id, start_in, now_excluded};
}

Effects Continuations::OnSnapshot(const std::vector<SlurmJob>& listed) {
  history_.reset();
  auto runs = ctx_.store.ListRuns(10000, /*active_only=*/true);
  if (!runs.ok()) return {};
  Effects fx;
  for (const RunRecord& run : *runs) {
    if (run.state != RunState::kRunning) continue;
    auto spec = ctx_.ParseStoredSpec(run);
    if (!spec.ok() || spec->restart.continuation != "ahead") continue;
    auto attempts = ctx_.store.Attempts(run.run_id);
    auto current = ctx_.store.LatestAttempt(run.run_id);
    if (!attempts.ok() || !current.ok() || !current->has_value()) continue;
    const AttemptRecord& a = **current;
    if (!a.live() || a.slurm_job_id.empty()) continue;
    auto job = std::find_if(listed.begin(), listed.end(),
                            [&](const SlurmJob& j) { return j.id == a.slurm_job_id; });
    if (job == listed.end() || job->state.base() != SlurmJobState::kRunning) continue;
    auto waiting = WaitingAttemptOf(*attempts);
    if (waiting && !waiting->slurm_job_id.empty())
      fx += KeepOffStruckNodes(run.run_id, *waiting, listed);
    // The waiting attempts given up since the current one began: after a
    // refused sbatch (a site's job limit), or three of any kind, none more
    // for this attempt; its continuation follows its end.
    int given_up = 0;
    bool refused = false;
    for (const AttemptRecord& w : *attempts)
      if (w.attempt > a.attempt && !w.live()) {
        ++given_up;
        refused = refused || w.end_reason.rfind("sbatch refused", 0) == 0;
      }
    if (refused || given_up >= kMaxWaitingGivenUp) continue;
    AheadFacts f;
    f.ahead_mode = true;
    f.state = run.state;
    // One stored without its job id is submitted again (Scheduler::QueueAhead).
    f.has_waiting = waiting && !waiting->slurm_job_id.empty();
    f.time_limit = job->time_limit;
    f.time_left = job->time_left;
    if (f.has_waiting || !f.time_limit) continue;
    LeadChoice lead =
        ChooseContinuationLead(spec->restart.continuation_lead_s,
                               QueueWaits(spec->slurm.partition), spec->slurm.signal_grace_s,
                               job->time_limit);
    f.lead = lead.lead;
    AheadDecision d = DecideAhead(f);
    if (d.submit) fx.Add(QueueAheadOf{run.run_id, d.begin_in, d.why + " (lead: " + lead.why + ")"});
  }
  return fx;
}

}  // namespace trellis::controller
