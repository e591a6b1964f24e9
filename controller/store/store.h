#pragma once
// The controller's durable state in one SQLite file (local disk: WAL does not
// work over NFS/Lustre). One writer: the controller's loop thread.

#include <functional>
#include <map>
#include <memory>

#include "absl/status/statusor.h"
#include "common/sqlite.h"
#include "controller/core/goodput.h"
#include "controller/core/quarantine.h"
#include "controller/store/records.h"

namespace trellis::controller {

class Store {
 public:
  // Opens or creates the database and applies pending migrations; refuses a
  // database written by a newer Trellis.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);

  // Inserts a QUEUED run named "<name>-<seq>" plus its first event.
  // `run_dir_for` maps the new run id to its directory.
  absl::StatusOr<RunRecord> CreateRun(const std::string& name, const std::string& user,
                                      const std::string& spec_toml, int nodes, int ranks_per_node,
                                      const std::function<std::string(const std::string&)>& run_dir_for,
                                      WallTime now);
  absl::StatusOr<RunRecord> GetRun(const std::string& run_id);
  absl::StatusOr<std::vector<RunRecord>> ListRuns(int limit, bool active_only);
  // How many runs are in each state (states without runs are absent).
  absl::StatusOr<std::map<RunState, int64_t>> CountRunsByState();

  // One transaction: checks the table, updates the run, appends the event,
  // then runs `also` (more writes that must land with the transition).
  absl::Status Transition(const std::string& run_id, RunState to, const std::string& reason,
                          const std::string& evidence_json, WallTime now,
                          const std::function<absl::Status(Store&)>& also = nullptr);
  // Updates the reason a run waits in its state (no transition, no event).
  absl::Status SetStateReason(const std::string& run_id, const std::string& reason);
  absl::Status SetRestartBackoff(const std::string& run_id, int restarts, WallTime not_before);

  absl::Status CreateAttempt(const AttemptRecord& attempt);
  absl::Status SetAttemptJob(const std::string& run_id, int attempt, const std::string& job_id);
  absl::Status SetAttemptNodes(const std::string& run_id, int attempt, const std::string& nodes);
  absl::Status SetAttemptLaunches(const std::string& run_id, int attempt, int launches);
  absl::Status EndAttempt(const std::string& run_id, int attempt, int exit_code,
                          const std::string& reason, WallTime now);
  absl::StatusOr<std::vector<AttemptRecord>> Attempts(const std::string& run_id);
  absl::StatusOr<std::optional<AttemptRecord>> LatestAttempt(const std::string& run_id);

  absl::StatusOr<std::vector<EventRecord>> Events(const std::string& run_id);

  // Folds one rank's record into its step's summary row and returns the row.
  absl::StatusOr<StepRow> RecordStep(const std::string& run_id, int attempt, int launch,
                                     int64_t step, double loss, int64_t tokens,
                                     double step_seconds, const std::string& record_json,
                                     WallTime now);
  absl::StatusOr<std::vector<StepRow>> RecentSteps(const std::string& run_id, int limit);
  // What goodput needs of the run's steps (LaunchSteps, controller/core/goodput.h):
  // per launch that recorded one, a few index lookups, never a scan of every step.
  absl::StatusOr<std::vector<LaunchSteps>> GoodputSteps(const std::string& run_id);

  // The quarantine list (one per controller).
  absl::StatusOr<std::vector<QuarantineEntry>> QuarantineEntries();
  absl::StatusOr<std::optional<QuarantineEntry>> FindQuarantine(const std::string& node);
  absl::Status PutQuarantine(const QuarantineEntry& entry);

  // Inserts or replaces the launch's row.
  absl::Status PutLaunch(const LaunchRecord& launch);
  absl::StatusOr<std::vector<LaunchRecord>> Launches(const std::string& run_id);
  absl::Status AddHealthEvent(const HealthEventRecord& event);
  // The newest `limit`, oldest first.
  absl::StatusOr<std::vector<HealthEventRecord>> HealthEvents(const std::string& run_id,
                                                              int limit);

  absl::Status AddGateRecord(const std::string& run_id, const GateRecordRow& record);
  absl::StatusOr<std::vector<GateRecordRow>> GateRecords(const std::string& run_id, int attempt);

  sqlite::Db& db() { return *db_; }

 private:
  explicit Store(std::unique_ptr<sqlite::Db> db) : db_(std::move(db)) {}
  absl::StatusOr<RunRecord> ReadRun(sqlite::Statement& st);
  std::unique_ptr<sqlite::Db> db_;
};

// The ordered schema migrations (exposed for the migration test).
const std::vector<const char*>& Migrations();

}  // namespace trellis::controller
