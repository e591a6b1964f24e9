#include "controller/app/loop_context.h"

#include "common/log.h"
#include "common/status.h"
#include "controller/store/store.h"

namespace trellis::controller {

absl::StatusOr<spec::RunSpec> LoopContext::ParseStoredSpec(const RunRecord& run) const {
  spec::FieldErrors errors;
  auto spec = spec::ParseRunSpec(run.spec_toml, &errors);
  if (!spec) return absl::DataLossError("stored spec of " + run.run_id + ": " + JoinErrors(errors));
  if (spec->slurm.partition.empty()) spec->slurm.partition = config.default_partition;
  return *spec;
}

std::string LoopContext::RunDirFor(const spec::RunSpec& spec, const std::string& run_id) const {
  std::string base = config.output_root;
  if (!spec.job.output_dir.empty()) base += "/" + spec.job.output_dir;
  return base + "/" + run_id;
}

std::vector<std::string> LoopContext::ExcludedNow() const {
  auto entries = store.QuarantineEntries();
  if (!entries.ok()) {
    spdlog::error("quarantine list unreadable: {}", std::string(entries.status().message()));
    return {};
  }
  return ExcludedNodes(*entries, clock.Now(), config.quarantine);
}

absl::StatusOr<RunRecord> StoreReader::GetRun(const std::string& run_id) {
  return store_.GetRun(run_id);
}
absl::StatusOr<std::vector<RunRecord>> StoreReader::ListRuns(int limit, bool active_only) {
  return store_.ListRuns(limit, active_only);
}
absl::StatusOr<std::vector<AttemptRecord>> StoreReader::Attempts(const std::string& run_id) {
  return store_.Attempts(run_id);
}
absl::StatusOr<std::optional<AttemptRecord>> StoreReader::LatestAttempt(
    const std::string& run_id) {
  return store_.LatestAttempt(run_id);
}
absl::StatusOr<std::vector<LaunchRecord>> StoreReader::Launches(const std::string& run_id) {
  return store_.Launches(run_id);
}
absl::StatusOr<std::vector<LaunchRecord>> StoreReader::LaunchesEndedSince(
    WallTime since, const std::string& failure_class) {
  return store_.LaunchesEndedSince(since, failure_class);
}
absl::StatusOr<std::vector<WorkerReportRecord>> StoreReader::WorkerReports(
    const std::string& run_id, int attempt, int launch) {
  return store_.WorkerReports(run_id, attempt, launch);
}
absl::StatusOr<std::set<int>> StoreReader::RanksWithEvents(const std::string& run_id,
                                                           int attempt, int launch,
                                                           const std::string& kind,
                                                           const std::string& ended_kind) {
  return store_.RanksWithEvents(run_id, attempt, launch, kind, ended_kind);
}
absl::StatusOr<std::vector<QuarantineEntry>> StoreReader::QuarantineEntries() {
  return store_.QuarantineEntries();
}
absl::StatusOr<std::vector<HealthEventRecord>> StoreReader::HealthEventsOf(
    const std::string& run_id, const std::string& kind) {
  auto all = store_.HealthEvents(run_id, kHealthEventsRead);
  if (!all.ok()) return all.status();
  std::vector<HealthEventRecord> out;
  for (auto& e : *all)
    if (e.kind == kind) out.push_back(std::move(e));
  return out;
}
absl::StatusOr<std::vector<PoolJobRecord>> StoreReader::PoolJobs(const std::string& run_id) {
  return store_.PoolJobs(run_id);
}

}  // namespace trellis::controller
