// A launch that ran when the controller stopped goes on after the restart:
// its ranks never noticed. At start-up its state is rebuilt from the GO its
// row kept (GoRecord): run health watches it again, a fault stops its own
// srun step, and its batch script's question settles it like any launch
// (classification, blame, a relaunch inside the allocation). The workers'
// final reports were stored, or left in the launch's directory by a worker
// that could not reach the controller, so a node that finished before the
// restart is known as finished, and any other is given heartbeat_timeout_s
// from the restart to be heard again (run_health.cc). The rank exits
// streamed before the restart are gone; a final report repeats them.
#include <nlohmann/json.hpp>

#include "absl/strings/str_split.h"

#include "common/log.h"
#include "common/status.h"
#include "controller/app/launch_answers.h"
#include "controller/app/launches.h"

namespace trellis::controller {

Effects LaunchResume::ResumeAtStartup() {
  Effects fx;
  auto runs = ctx_.store.ListRuns(100000, /*active_only=*/true);
  if (!runs.ok()) {
    spdlog::error("launches not resumed: {}", std::string(runs.status().message()));
    return fx;
  }
  for (const RunRecord& run : *runs) {
    // GATING: the GO was stored, and the controller stopped before RUNNING was.
    if (run.state != RunState::kRunning && run.state != RunState::kGating) continue;
    auto attempt = ctx_.store.LatestAttempt(run.run_id);
    if (!attempt.ok() || !attempt->has_value() || !(*attempt)->live()) continue;
    auto rows = ctx_.store.Launches(run.run_id);
    if (!rows.ok()) continue;
    const LaunchRecord* newest = nullptr;
    for (const LaunchRecord& row : *rows)
      if (row.attempt == (*attempt)->attempt && (!newest || row.launch > newest->launch))
        newest = &row;
    if (newest == nullptr || newest->ended) continue;
    fx += Resume(run, **attempt, *newest);
  }
  return fx;
}

// Whether a handoff told the launch to stop before the restart (its event,
// launch_handoff.cc, names the launch it stopped): its end is the handoff's,
// not a time limit's.
bool LaunchResume::HandedOver(const std::string& run_id, int attempt, int launch) {
  auto events = ctx_.store.HealthEventsOf(run_id, kContinuationEvent);
  if (!events.ok()) {
    spdlog::warn("run {}: its continuation events were not read: {}", run_id,
                 std::string(events.status().message()));
    return false;
  }
  for (const HealthEventRecord& e : *events) {
    const nlohmann::json j = nlohmann::json::parse(e.detail_json, nullptr, false);
    if (j.is_object() && j.value("event", "") == "handoff" &&
        j.value("from_attempt", -1) == attempt && j.value("from_launch", -1) == launch)
      return true;
  }
  return false;
}

Effects LaunchResume::Resume(const RunRecord& run, const AttemptRecord& attempt,
                             const LaunchRecord& row) {
  Effects fx;
  const std::string name = std::to_string(row.attempt) + "." + std::to_string(row.launch);
  if (row.go_json.empty()) {
    spdlog::warn("run {}: launch {} ran before the restart, and its row keeps no GO (a store "
                 "older than schema 6): not watched; srun's status will settle it",
                 run.run_id, name);
    return fx;
  }
  absl::StatusOr<GoRecord> record = GoRecordFromJson(row.go_json);
  absl::StatusOr<spec::RunSpec> spec = ctx_.ParseStoredSpec(run);
  auto reports = ctx_.store.WorkerReports(run.run_id, row.attempt, row.launch);
  absl::Status bad = !record.ok() ? record.status() : !spec.ok() ? spec.status()
                                                                 : reports.status();
  if (!bad.ok()) {
    spdlog::error("run {}: launch {} not resumed: {}", run.run_id, name,
                  std::string(bad.message()));
    return fx;
  }
  if (!record->reports_kept) {
    // Its finished workers cannot be told from lost ones.
    spdlog::warn("run {}: launch {} ran before the restart under a controller that kept no "
                 "final reports (schema 6): not watched; srun's status will settle it",
                 run.run_id, name);
    return fx;
  }
  LaunchState& l = registry_.Add({run.run_id, row.attempt, row.launch});
  l.needed_nodes = spec->slurm.nodes;
  l.ranks_per_node = record->go.ranks_per_node;
  l.expected_nodes = static_cast<int>(record->allocation.size());
  l.planned = record->allocation;
  l.secret_sha256 = attempt.secret_sha256;
  l.slurm_job_id = attempt.slurm_job_id;
  GateOutcome go;
  go.kind = GateOutcome::kGo;
  go.reason = record->go.reason;
  l.outcome = go;
  l.step = record->step;
  l.go_nodes = absl::StrSplit(row.nodes, ',', absl::SkipEmpty());
  l.go = record->go;
  l.go.data_roots = ctx_.config.data_roots;
  l.metrics_addrs = record->metrics_addrs;
  l.started = row.started;
  l.resumed = true;
  l.handoff = HandedOver(run.run_id, row.attempt, row.launch);
  for (const WorkerReportRecord& stored : *reports) {
    absl::StatusOr<WorkerReport> report = WorkerReportFromRecord(stored);
    if (!report.ok()) {
      // Still a finished worker; how its ranks ended is lost.
      spdlog::error("run {}: {}", run.run_id, std::string(report.status().message()));
      report = WorkerReport{{}, stored.oom_kills, stored.time_limit_warned, stored.exit_code,
                            stored.reason};
    }
    l.Gather(stored.node, *report);
  }
  // A worker that could not reach this controller to send its final report
  // left it in its launch's directory (FinalReportPath).
  for (const std::string& node : l.go_nodes) {
    if (l.reported.count(node) || !ctx_.config.read_final_report) continue;
    absl::StatusOr<WorkerReport> left =
        ctx_.config.read_final_report(run.run_dir, {run.run_id, row.attempt, row.launch, node, ""});
    if (left.ok()) {
      spdlog::info("run {}: launch {}: the final report of {} was read from its file", run.run_id,
                   name, node);
      l.Gather(node, *left);
    } else if (!absl::IsNotFound(left.status())) {
      spdlog::warn("run {}: launch {}: {}", run.run_id, name, std::string(left.status().message()));
    }
  }
  spdlog::info("run {}: launch {} on {} ran before the restart: watched again (srun step {}.{})",
               run.run_id, name, row.nodes, l.step.job_id, l.step.step_id);
  fx.Add(WatchOf(l, ctx_));
  if (run.state == RunState::kGating) {
    std::string run_id = run.run_id, nodes = row.nodes;
    int attempt_no = row.attempt, launch_no = row.launch;
    fx.Add(Transition{run_id, RunState::kRunning, go.reason, "{}",
                      {RecordAttemptNodes{run_id, attempt_no, nodes},
                       RecordAttemptLaunches{run_id, attempt_no, launch_no}}});
  }
  return fx;
}

}  // namespace trellis::controller
