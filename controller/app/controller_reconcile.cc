// Reconciliation with Slurm: at start-up and periodically, settle attempts
// whose job ended or vanished without the batch script reaching us.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "controller/app/controller.h"

namespace trellis::controller {

namespace asio = boost::asio;

std::optional<ExitFile> Controller::ReadExitFile(const RunRecord& run, int attempt) const {
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
  return f;
}

void Controller::ReconcileTick(bool startup) {
  if (reconcile_in_flight_ || stopped_) return;
  auto runs = store_->ListRuns(10000, /*active_only=*/true);
  if (!runs.ok()) return spdlog::error("reconcile: {}", std::string(runs.status().message()));
  std::vector<std::string> job_ids;
  for (const auto& r : *runs) {
    auto a = store_->LatestAttempt(r.run_id);
    if (a.ok() && a->has_value() && (*a)->live() && !(*a)->slurm_job_id.empty())
      job_ids.push_back((*a)->slurm_job_id);
  }
  if (job_ids.empty()) return;
  reconcile_in_flight_ = true;
  asio::post(slurm_pool_, [this, job_ids, startup] {
    auto listed = slurm_->ListJobs();
    std::map<std::string, absl::StatusOr<std::optional<SlurmJob>>> shown;
    for (const auto& id : job_ids) {
      bool in_queue = false;
      if (listed.ok())
        for (const auto& j : *listed) in_queue = in_queue || j.id == id;
      if (in_queue) continue;
      // Not queued or running: ask for its end state (accounting first where it exists).
      auto acct = slurm_->AccountingJob(id);
      shown.emplace(id, acct.ok() && acct->has_value() ? acct : slurm_->ShowJob(id));
    }
    asio::post(io_, [this, listed, shown, startup] { OnSlurmSnapshot(listed, shown, startup); });
  });
}

void Controller::OnSlurmSnapshot(absl::StatusOr<std::vector<SlurmJob>> listed,
                                 std::map<std::string, absl::StatusOr<std::optional<SlurmJob>>> shown,
                                 bool startup) {
  reconcile_in_flight_ = false;
  if (!listed.ok()) return spdlog::warn("reconcile: squeue: {}", std::string(listed.status().message()));
  auto runs = store_->ListRuns(10000, true);
  if (!runs.ok()) return;
  for (const auto& run : *runs) {
    auto a = store_->LatestAttempt(run.run_id);
    if (!a.ok() || !a->has_value() || !(*a)->live() || (*a)->slurm_job_id.empty()) continue;
    const AttemptRecord& attempt = **a;
    std::optional<SlurmJob> job;
    for (const auto& j : *listed)
      if (j.id == attempt.slurm_job_id) job = j;
    if (!job) {
      auto it = shown.find(attempt.slurm_job_id);
      if (it == shown.end()) continue;  // submitted after the snapshot
      if (!it->second.ok()) {
        spdlog::warn("reconcile: job {}: {}", attempt.slurm_job_id, std::string(it->second.status().message()));
        continue;
      }
      job = *it->second;
    }
    Reconciliation r = Reconcile(job, ReadExitFile(run, attempt.attempt));
    if (!r.nodelist.empty() && r.nodelist != attempt.nodelist && attempt.nodelist.empty())
      (void)store_->SetAttemptNodes(run.run_id, attempt.attempt, r.nodelist);
    if (r.kind == Reconciliation::kEnded) {
      if (startup) spdlog::info("run {}: job {} ended while the controller was down", run.run_id,
                                attempt.slurm_job_id);
      SettleEndedAttempt(run, attempt, r);
    }
  }
}

void Controller::SettleEndedAttempt(const RunRecord& run, const AttemptRecord& attempt,
                                    const Reconciliation& r) {
  std::string evidence = "{\"slurm_job_id\":\"" + attempt.slurm_job_id +
                         "\",\"exit_code\":" + std::to_string(r.exit_code) + "}";
  AbortLaunches(run.run_id, "Slurm job ended");
  if (r.succeeded && run.state == RunState::kRunning) {
    (void)Transition(run.run_id, RunState::kSucceeded, r.reason, evidence, [&](Store& s) {
      return s.EndAttempt(run.run_id, attempt.attempt, 0, r.reason, clock_->Now());
    });
    return;
  }
  std::string why = r.succeeded ? "Slurm job ended before the run started: " + r.reason : r.reason;
  FailAttempt(run.run_id, attempt.attempt, r.succeeded ? 1 : r.exit_code, why, evidence);
}

}  // namespace trellis::controller
