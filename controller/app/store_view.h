#pragma once
// What the parts of the controller may read of the store: a narrow,
// read-only view. The shell hands them StoreReader over the real store;
// their tests hand them a fake (fake_store_view.h). Writes are effects
// (effects.h), carried out by the shell.

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/core/quarantine.h"
#include "controller/store/records.h"

namespace trellis::controller {

class Store;

class StoreView {
 public:
  virtual ~StoreView() = default;
  virtual absl::StatusOr<RunRecord> GetRun(const std::string& run_id) = 0;
  // Newest first.
  virtual absl::StatusOr<std::vector<RunRecord>> ListRuns(int limit, bool active_only) = 0;
  virtual absl::StatusOr<std::vector<AttemptRecord>> Attempts(const std::string& run_id) = 0;
  virtual absl::StatusOr<std::optional<AttemptRecord>> LatestAttempt(
      const std::string& run_id) = 0;
  virtual absl::StatusOr<std::vector<LaunchRecord>> Launches(const std::string& run_id) = 0;
  // Every run's launches of `failure_class` ended at `since` or later, oldest first.
  virtual absl::StatusOr<std::vector<LaunchRecord>> LaunchesEndedSince(
      WallTime since, const std::string& failure_class) = 0;
  virtual absl::StatusOr<std::vector<WorkerReportRecord>> WorkerReports(
      const std::string& run_id, int attempt, int launch) = 0;
  // The ranks of the launch with an event of `kind` and none of `ended_kind` after it.
  virtual absl::StatusOr<std::set<int>> RanksWithEvents(const std::string& run_id, int attempt,
                                                        int launch, const std::string& kind,
                                                        const std::string& ended_kind) = 0;
  virtual absl::StatusOr<std::vector<QuarantineEntry>> QuarantineEntries() = 0;
  // The run's health events of `kind`, of its newest kHealthEventsRead, oldest first.
  virtual absl::StatusOr<std::vector<HealthEventRecord>> HealthEventsOf(
      const std::string& run_id, const std::string& kind) = 0;
  // The run's spare pool jobs, oldest first; "": every run's live ones.
  virtual absl::StatusOr<std::vector<PoolJobRecord>> PoolJobs(const std::string& run_id) = 0;
};

inline constexpr int kHealthEventsRead = 1000;

// The real store, read only.
class StoreReader : public StoreView {
 public:
  explicit StoreReader(Store& store) : store_(store) {}
  absl::StatusOr<RunRecord> GetRun(const std::string& run_id) override;
  absl::StatusOr<std::vector<RunRecord>> ListRuns(int limit, bool active_only) override;
  absl::StatusOr<std::vector<AttemptRecord>> Attempts(const std::string& run_id) override;
  absl::StatusOr<std::optional<AttemptRecord>> LatestAttempt(const std::string& run_id) override;
  absl::StatusOr<std::vector<LaunchRecord>> Launches(const std::string& run_id) override;
  absl::StatusOr<std::vector<LaunchRecord>> LaunchesEndedSince(
      WallTime since, const std::string& failure_class) override;
  absl::StatusOr<std::vector<WorkerReportRecord>> WorkerReports(const std::string& run_id,
                                                                int attempt,
                                                                int launch) override;
  absl::StatusOr<std::set<int>> RanksWithEvents(const std::string& run_id, int attempt,
                                                int launch, const std::string& kind,
                                                const std::string& ended_kind) override;
  absl::StatusOr<std::vector<QuarantineEntry>> QuarantineEntries() override;
  absl::StatusOr<std::vector<HealthEventRecord>> HealthEventsOf(const std::string& run_id,
                                                                const std::string& kind) override;
  absl::StatusOr<std::vector<PoolJobRecord>> PoolJobs(const std::string& run_id) override;

 private:
  Store& store_;
};

}  // namespace trellis::controller
