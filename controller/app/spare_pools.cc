#include "controller/app/spare_pools.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/sha256.h"
#include "controller/app/continuations.h"
#include "controller/core/batch_script.h"
#include "controller/core/hostlist.h"

namespace trellis::controller {

namespace {

bool Refused(const absl::Status& st) {
  return absl::StrContains(st.message(), "Batch job submission failed");
}

}  // namespace

HealthEventRecord SparePoolEvent(const PoolJobRecord& row, int attempt, int launch, WallTime now,
                                 std::string detail, const nlohmann::json& j) {
  nlohmann::json with = j;
  with["pool"] = row.pool;
  if (!row.job_id.empty()) with["slurm_job_id"] = row.job_id;
  return RunEvent(kSparePoolEvent, row.run_id, attempt, launch, now, std::move(detail), with);
}

std::optional<PoolJobRecord> StandingPoolOf(const std::vector<PoolJobRecord>& rows) {
  for (const PoolJobRecord& p : rows)
    if (p.standing()) return p;
  return std::nullopt;
}

std::vector<std::string> PoolNodes(const PoolJobRecord& row) {
  auto nodes = ExpandHostlist(row.nodelist);
  return nodes.ok() ? *nodes : std::vector<std::string>{};
}

std::optional<std::string> SparePools::DrawnJobOn(const std::string& run_id, int attempt,
                                                  const std::string& node) {
  auto rows = ctx_.store.PoolJobs(run_id);
  if (!rows.ok()) return std::nullopt;
  for (const PoolJobRecord& p : *rows) {
    if (p.drawn_attempt != attempt || p.job_id.empty()) continue;
    std::vector<std::string> nodes = PoolNodes(p);
    if (std::find(nodes.begin(), nodes.end(), node) != nodes.end()) return p.job_id;
  }
  return std::nullopt;
}

Effects SparePools::Submit(const RunRecord& run, const spec::RunSpec& spec, PoolJobRecord row) {
  const bool first = row.job_name.empty();
  if (first)
    row.job_name = PoolJobName(run.run_id, row.pool,
                               Sha256Hex(run.run_dir + "/pool-" + std::to_string(row.pool) + "@" +
                                         std::to_string(ToUnixMillis(row.submitted))));
  // Off the quarantined nodes and the run's own (its allocation's, its other
  // pool jobs'): a pool there spares nothing.
  std::vector<std::string> exclude = ctx_.ExcludedNow();
  if (auto current = ctx_.store.LatestAttempt(run.run_id); current.ok() && current->has_value())
    if (auto own = ExpandHostlist((*current)->nodelist); own.ok())
      exclude.insert(exclude.end(), own->begin(), own->end());
  if (auto pools = ctx_.store.PoolJobs(run.run_id); pools.ok())
    for (const PoolJobRecord& p : *pools)
      if (p.live())
        for (const std::string& n : PoolNodes(p)) exclude.push_back(n);
  std::sort(exclude.begin(), exclude.end());
  exclude.erase(std::unique(exclude.begin(), exclude.end()), exclude.end());
  // A new secret at each sbatch, its file written just before it (a job
  // found by name whose standby worker read the old one is refused; its
  // nodes may still be drawn, and are gated when they join).
  const std::string secret = auth::RandomSecretHex();
  row.secret_sha256 = Sha256Hex(secret);
  const PoolStandbyPaths standby{ctx_.config.worker_bin, ctx_.config.advertise_addr,
                                 PoolSecretPath(run.run_dir, row.pool), ctx_.config.worker_tls_ca,
                                 ctx_.config.controller_file};
  auto args =
      PoolSbatchArgs(spec, run.run_id, run.run_dir, row.job_name, row.pool, exclude, standby);
  if (!args.ok())
    return End(row, "cannot submit: " + std::string(args.status().message()), /*cancel=*/false);
  Effects fx;
  fx.Add(RecordPoolJob{row});  // stored before Slurm is asked
  in_flight_.insert({run.run_id, row.pool});
  spdlog::info("run {}: spare pool job {} ({} nodes){}", run.run_id, row.pool, row.nodes_asked,
               first ? " submitted" : " submitted again (its sbatch had not answered)");
  SubmitJob call;
  call.run_id = run.run_id;
  call.job_name = row.job_name;
  call.args = std::move(*args);
  call.pool = row.pool;
  call.files_first.push_back({standby.secret_file, secret + "\n"});
  fx.Add(std::move(call));
  return fx;
}

Effects SparePools::FindToCancel(const PoolJobRecord& row) {
  in_flight_.insert({row.run_id, row.pool});
  SubmitJob call;
  call.run_id = row.run_id;
  call.job_name = row.job_name;
  call.pool = row.pool;
  call.only_adopt = true;
  return call;
}

Effects SparePools::End(PoolJobRecord row, const std::string& reason, bool cancel) {
  Effects fx;
  const WallTime now = ctx_.clock.Now();
  row.ended = now;
  row.end_reason = reason;
  fx.Add(RecordPoolJob{row});
  if (cancel && !row.job_id.empty())
    fx.Add(CancelJob{row.job_id, "run " + row.run_id + "'s spare pool job " +
                                     std::to_string(row.pool) + ": " + reason});
  spdlog::info("run {}: spare pool job {} ({}) ended: {}", row.run_id, row.pool,
               row.job_id.empty() ? "no Slurm job" : "Slurm job " + row.job_id, reason);
  fx.Add(RecordHealthEvent{SparePoolEvent(
      row, row.drawn_attempt, row.drawn_launch, now,
      "spare pool job " + std::to_string(row.pool) + " ended: " + reason,
      {{"event", "ended"}, {"reason", reason}})});
  return fx;
}

Effects SparePools::RunEnded(const std::string& run_id) {
  auto rows = ctx_.store.PoolJobs(run_id);
  if (!rows.ok()) return {};
  Effects fx;
  for (const PoolJobRecord& p : *rows)
    if (p.live()) fx += End(p, "the run ended", /*cancel=*/true);
  return fx;
}

Effects SparePools::OnSnapshot(const JobsSeen& seen) {
  const WallTime now = ctx_.clock.Now();
  Effects fx = StandbysTick(now);
  if (!seen.listed.ok()) return fx;
  // The pool jobs that stand or wait.
  auto live = ctx_.store.PoolJobs("");
  const std::vector<std::string> excluded =
      live.ok() && !live->empty() ? ctx_.ExcludedNow() : std::vector<std::string>{};
  if (live.ok())
    for (const PoolJobRecord& row : *live) {
      auto run = ctx_.store.GetRun(row.run_id);
      const bool run_over = !run.ok() || IsTerminal(run->state);
      if (row.job_id.empty()) {
        // Its sbatch never answered (the controller stopped in between): a
        // run that goes on submits it again below; one that ended while the
        // controller was down has the job found by name and cancelled.
        if (run_over && !in_flight_.count({row.run_id, row.pool})) fx += FindToCancel(row);
        continue;
      }
      PoolJobSeen s;
      s.run_over = run_over;
      if (row.drawn()) {
        auto attempts = ctx_.store.Attempts(row.run_id);
        s.drawn_attempt_over = true;
        if (attempts.ok())
          for (const AttemptRecord& a : *attempts)
            if (a.attempt == row.drawn_attempt) s.drawn_attempt_over = !a.live();
      }
      for (const std::string& n : PoolNodes(row))
        if (std::find(excluded.begin(), excluded.end(), n) != excluded.end())
          s.quarantined.push_back(n);
      std::string run_job;
      if (auto current = ctx_.store.LatestAttempt(row.run_id); current.ok() && current->has_value())
        run_job = (*current)->slurm_job_id;
      for (const SlurmJob& j : *seen.listed) {
        if (j.id == row.job_id) s.listed = j;
        if (!run_job.empty() && j.id == run_job && j.state == SlurmJobState::kRunning)
          s.run_job_time_left = j.time_left;
      }
      if (auto it = seen.shown.find(row.job_id); !s.listed && it != seen.shown.end() &&
                                                 it->second.ok()) {
        s.looked_up = true;
        s.ended = *it->second;
      }
      PoolJobStep step = DecidePoolJob(row, s);
      switch (step.kind) {
        case PoolJobStep::kNothing: break;
        case PoolJobStep::kCancel: fx += End(row, step.reason, /*cancel=*/true); break;
        case PoolJobStep::kEnded: fx += End(row, step.reason, /*cancel=*/false); break;
        case PoolJobStep::kStands: {
          PoolJobRecord stands = row;
          if (!stands.standing_since) stands.standing_since = now;
          stands.nodelist = step.nodelist;
          fx.Add(RecordPoolJob{stands});
          const std::string detail = "spare pool job " + std::to_string(row.pool) +
                                     " (Slurm job " + row.job_id + ") stands on " +
                                     step.nodelist + ", " +
                                     std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                                        now - row.submitted)
                                                        .count()) +
                                     " s after its submission";
          spdlog::info("run {}: {}", row.run_id, detail);
          fx.Add(RecordHealthEvent{SparePoolEvent(stands, 0, 0, now, detail,
                                                  {{"event", "standing"},
                                                   {"nodes", step.nodelist}})});
          break;
        }
      }
    }
  // Runs that train and need a pool job (none yet, or a refill), and pool
  // jobs stored whose sbatch never answered (the controller stopped).
  auto runs = ctx_.store.ListRuns(10000, /*active_only=*/true);
  if (!runs.ok()) return fx;
  for (const RunRecord& run : *runs) {
    auto spec = ctx_.ParseStoredSpec(run);
    if (!spec.ok() || spec->restart.spare_pool_nodes <= 0) continue;
    auto rows = ctx_.store.PoolJobs(run.run_id);
    if (!rows.ok()) continue;
    for (const PoolJobRecord& row : *rows)
      if (row.live() && row.job_id.empty() && !in_flight_.count({run.run_id, row.pool}))
        fx += Submit(run, *spec, row);
    if (!NeedsPoolJob(run.state, spec->restart.spare_pool_nodes, *rows, now)) continue;
    PoolJobRecord row;
    row.run_id = run.run_id;
    row.pool = rows->empty() ? 1 : rows->back().pool + 1;
    row.nodes_asked = spec->restart.spare_pool_nodes;
    row.submitted = now;
    fx += Submit(run, *spec, row);
  }
  return fx;
}

Effects SparePools::OnSubmitted(const JobSubmitted& out) {
  in_flight_.erase({out.run_id, out.pool});
  auto rows = ctx_.store.PoolJobs(out.run_id);
  if (!rows.ok()) return {};
  auto it = std::find_if(rows->begin(), rows->end(),
                         [&](const PoolJobRecord& p) { return p.pool == out.pool; });
  if (it == rows->end()) return {};
  PoolJobRecord row = *it;
  Effects fx;
  for (const auto& c : out.cancelled)
    spdlog::warn("run {}: duplicate spare pool job {} cancelled", out.run_id, c);
  if (!out.job.ok() && out.job.status().code() == absl::StatusCode::kNotFound && row.live())
    return End(row, "the run ended (its job was never submitted)", /*cancel=*/false);
  if (!out.job.ok()) {
    const std::string why(out.job.status().message());
    if (!Refused(out.job.status())) {
      // Transient: the next snapshot submits it again under the same name.
      spdlog::warn("run {}: sbatch of spare pool job {}: {}", out.run_id, row.pool, why);
      return fx;
    }
    const int in_a_row = PoolRefusalsInARow(*rows) + 1;
    return End(row,
               std::string(kPoolRefusedPrefix) + ": " + why + " (" + std::to_string(in_a_row) +
                   " in a row; the next in " +
                   std::to_string(std::min<int64_t>(kPoolRefusalBackoff.count() << std::min(in_a_row - 1, 6), 3600)) +
                   " s)",
               /*cancel=*/false);
  }
  row.job_id = *out.job;
  auto run = ctx_.store.GetRun(out.run_id);
  if (!row.live() || !run.ok() || IsTerminal(run->state)) {
    // The run ended (or the row did) while sbatch ran: the job is not needed.
    if (row.live()) return End(row, "the run ended", /*cancel=*/true);
    return CancelJob{row.job_id, "run " + out.run_id + " ended before its spare pool job " +
                                     std::to_string(row.pool) + " was submitted"};
  }
  fx.Add(RecordPoolJob{row});
  const std::string detail = "spare pool job " + std::to_string(row.pool) + " of " +
                             std::to_string(row.nodes_asked) +
                             (row.nodes_asked == 1 ? " node" : " nodes") +
                             " queued as Slurm job " +
                             row.job_id + (out.adopted.empty() ? "" : " (found by its name)");
  fx.Add(RecordHealthEvent{SparePoolEvent(row, 0, 0, ctx_.clock.Now(), detail,
                                          {{"event", "submitted"},
                                           {"nodes_asked", row.nodes_asked}})});
  return fx;
}

}  // namespace trellis::controller
