#include "controller/core/spare_pool.h"

#include <algorithm>

namespace trellis::controller {

PoolJobStep DecidePoolJob(const PoolJobRecord& row, const PoolJobSeen& seen) {
  PoolJobStep step;
  if (!row.live() || row.job_id.empty()) return step;  // ended, or its sbatch not answered
  if (seen.run_over) {
    step.kind = PoolJobStep::kCancel;
    step.reason = "the run ended";
    return step;
  }
  if (row.drawn() && seen.drawn_attempt_over) {
    step.kind = PoolJobStep::kCancel;
    step.reason = "attempt " + std::to_string(row.drawn_attempt) + ", which drew it, ended";
    return step;
  }
  const SlurmJob* job = seen.listed ? &*seen.listed : nullptr;
  if (job == nullptr && seen.looked_up) {
    step.kind = PoolJobStep::kEnded;
    step.reason = seen.ended ? "Slurm ended it: " + seen.ended->state.name() +
                                   (seen.ended->reason.empty() || seen.ended->reason == "None"
                                        ? ""
                                        : " (" + seen.ended->reason + ")")
                             : "Slurm no longer knows it";
    return step;
  }
  if (job == nullptr) return step;
  if (job->state.terminal() || job->state == SlurmJobState::kCompleting) {
    step.kind = PoolJobStep::kEnded;
    step.reason = "Slurm ended it: " + job->state.name();
    return step;
  }
  if (job->state == SlurmJobState::kRunning && !row.drawn() && !seen.quarantined.empty()) {
    step.kind = PoolJobStep::kCancel;
    step.reason = "its node " + seen.quarantined.front() +
                  " is quarantined: replaced by one off the quarantined nodes";
    return step;
  }
  if (job->state == SlurmJobState::kRunning && !row.drawn() && job->time_left &&
      seen.run_job_time_left && *job->time_left < *seen.run_job_time_left) {
    step.kind = PoolJobStep::kCancel;
    step.reason = "it would end before the run's job (" + std::to_string(job->time_left->count()) +
                  " s left, the job " + std::to_string(seen.run_job_time_left->count()) +
                  " s): replaced by one that outlasts it";
    return step;
  }
  if (job->state == SlurmJobState::kRunning && !row.drawn() &&
      (!row.standing_since || row.nodelist != job->nodelist) && !job->nodelist.empty()) {
    step.kind = PoolJobStep::kStands;
    step.nodelist = job->nodelist;
  }
  return step;
}

int PoolRefusalsInARow(const std::vector<PoolJobRecord>& rows) {
  int refused = 0;
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) {
    if (it->live() || it->end_reason.rfind(kPoolRefusedPrefix, 0) != 0) break;
    ++refused;
  }
  return refused;
}

bool NeedsPoolJob(RunState state, int spare_pool_nodes, const std::vector<PoolJobRecord>& rows,
                  WallTime now) {
  if (state != RunState::kRunning || spare_pool_nodes <= 0) return false;
  for (const PoolJobRecord& p : rows)
    if (p.live() && !p.drawn()) return false;
  const int refused = PoolRefusalsInARow(rows);
  if (refused == 0) return true;
  const auto wait = std::min<std::chrono::seconds>(kPoolRefusalBackoff * (1 << std::min(refused - 1, 6)),
                                                   std::chrono::hours(1));
  return now >= *rows.back().ended + wait;
}

}  // namespace trellis::controller
