#pragma once
// The controller's durable state in one SQLite file (local disk: WAL does not
// work over NFS/Lustre). Written by the controller's loop thread, except the
// step rows: the step pipeline's StepWriter writes those with a connection of
// its own.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/status/statusor.h"
#include "common/sqlite.h"
#include "common/step_record.h"
#include "controller/core/goodput.h"
#include "controller/core/quarantine.h"
#include "controller/store/records.h"

namespace trellis::controller {

class Store {
 public:
  // Opens or creates the database with `journal` (common/sqlite.h) and
  // applies pending migrations; refuses a database written by a newer Trellis.
  // `may_commit`: the lease's check before every commit (common/sqlite.h).
  static absl::StatusOr<std::unique_ptr<Store>> Open(
      const std::string& path, sqlite::Journal journal = sqlite::Journal::kWal,
      sqlite::Db::CommitGuard may_commit = nullptr);

  // Inserts a QUEUED run named "<name>-<seq>" plus its first event.
  // `run_dir_for` maps the new run id to its directory.
  absl::StatusOr<RunRecord> CreateRun(const std::string& name, const std::string& user,
                                      const std::string& spec_toml, int nodes, int ranks_per_node,
                                      const std::function<std::string(const std::string&)>& run_dir_for,
                                      WallTime now);
  absl::StatusOr<RunRecord> GetRun(const std::string& run_id);
  // The newest `limit` runs; of `user` only when not empty (before the limit,
  // so a team member's page is full of their own runs).
  absl::StatusOr<std::vector<RunRecord>> ListRuns(int limit, bool active_only,
                                                  const std::string& user = "");
  // How many runs are in each state (states without runs are absent).
  absl::StatusOr<std::map<RunState, int64_t>> CountRunsByState();

  // One transaction: checks the table, updates the run, appends the event,
  // then runs `also` (more writes that must land with the transition).
  absl::Status Transition(const std::string& run_id, RunState to, const std::string& reason,
                          const std::string& evidence_json, WallTime now,
                          const std::function<absl::Status(Store&)>& also = nullptr);
  // Several transitions of one run, in order, in one transaction: all land or none.
  struct Step {
    RunState to;
    std::string reason;
    std::string evidence_json = "{}";
    std::function<absl::Status(Store&)> also = nullptr;  // none: the step alone
  };
  absl::Status Transitions(const std::string& run_id, const std::vector<Step>& steps,
                           WallTime now);
  // Updates the reason a run waits in its state (no transition, no event).
  absl::Status SetStateReason(const std::string& run_id, const std::string& reason);
  absl::Status SetRestartBackoff(const std::string& run_id, int restarts, WallTime not_before);
  // An event that changes no state (the run's state to itself, `note` its
  // reason), and the run's spec replaced by `spec_toml` where given: one
  // transaction.
  absl::Status NoteOnRun(const std::string& run_id, const std::string& note, WallTime now,
                         const std::optional<std::string>& spec_toml = std::nullopt);

  absl::Status CreateAttempt(const AttemptRecord& attempt);
  // A waiting attempt becomes the run's current one (records.h), eligible
  // from `begin` (released sooner, or later after a backoff, than its --begin).
  absl::Status TakeUpWaitingAttempt(const std::string& run_id, int attempt,
                                    std::optional<WallTime> begin);
  absl::Status SetAttemptJob(const std::string& run_id, int attempt, const std::string& job_id);
  absl::Status SetAttemptNodes(const std::string& run_id, int attempt, const std::string& nodes);
  absl::Status SetAttemptLaunches(const std::string& run_id, int attempt, int launches);
  absl::Status EndAttempt(const std::string& run_id, int attempt, int exit_code,
                          const std::string& reason, WallTime now);
  absl::StatusOr<std::vector<AttemptRecord>> Attempts(const std::string& run_id);
  // The run's current attempt: the newest one not waiting.
  absl::StatusOr<std::optional<AttemptRecord>> LatestAttempt(const std::string& run_id);

  absl::StatusOr<std::vector<EventRecord>> Events(const std::string& run_id);

  // Step rows are written by the step pipeline (step_writer.h).
  absl::StatusOr<std::vector<StepRow>> RecentSteps(const std::string& run_id, int limit);
  // What goodput needs of the run's steps (LaunchSteps, controller/core/goodput.h):
  // per launch that recorded one, a few index lookups, never a scan of every step.
  absl::StatusOr<std::vector<LaunchSteps>> GoodputSteps(const std::string& run_id);

  // The quarantine list (one per controller).
  absl::StatusOr<std::vector<QuarantineEntry>> QuarantineEntries();
  absl::StatusOr<std::optional<QuarantineEntry>> FindQuarantine(const std::string& node);
  absl::Status PutQuarantine(const QuarantineEntry& entry);
  // The node's newest certification check (its entry must exist).
  absl::Status SetNodeCheck(const std::string& node, const NodeCheck& check);
  // The node's entry gone, its strikes with it (trellis release --forget).
  absl::Status ForgetNode(const std::string& node);

  // Inserts or replaces the launch's row.
  absl::Status PutLaunch(const LaunchRecord& launch);
  absl::StatusOr<std::vector<LaunchRecord>> Launches(const std::string& run_id);
  // Every run's launches of `failure_class` that ended at `since` or later,
  // oldest first.
  absl::StatusOr<std::vector<LaunchRecord>> LaunchesEndedSince(WallTime since,
                                                               const std::string& failure_class);
  // Inserts or replaces the node's final report on its launch.
  absl::Status PutWorkerReport(const WorkerReportRecord& report);
  // The launch's final reports, in the order they were stored.
  absl::StatusOr<std::vector<WorkerReportRecord>> WorkerReports(const std::string& run_id,
                                                                int attempt, int launch);
  // Inserts or replaces the pool job's row (store_pools.cc).
  absl::Status PutPoolJob(const PoolJobRecord& pool);
  // The run's pool jobs, oldest first; "": every run's live ones.
  absl::StatusOr<std::vector<PoolJobRecord>> PoolJobs(const std::string& run_id);
  absl::Status AddHealthEvent(const HealthEventRecord& event);
  // The newest `limit`, oldest first.
  absl::StatusOr<std::vector<HealthEventRecord>> HealthEvents(const std::string& run_id,
                                                              int limit);
  // The ranks named by the launch's events of one kind (e.g. "straggler"),
  // but for those whose newest such event was followed by one of `ended_by`
  // (e.g. "straggler_ended") for the same rank.
  absl::StatusOr<std::set<int>> RanksWithEvents(const std::string& run_id, int attempt,
                                                int launch, const std::string& kind,
                                                const std::string& ended_by = "");

  absl::Status AddGateRecord(const std::string& run_id, const GateRecordRow& record);
  absl::StatusOr<std::vector<GateRecordRow>> GateRecords(const std::string& run_id, int attempt);

  sqlite::Db& db() { return *db_; }

 private:
  explicit Store(std::unique_ptr<sqlite::Db> db) : db_(std::move(db)) {}
  absl::StatusOr<RunRecord> ReadRun(sqlite::Statement& st);
  std::unique_ptr<sqlite::Db> db_;
};

// --- `trellis report`'s step history (store_steps_report.cc; docs/architecture.md,
// "Store"). The run's step summaries in (attempt, launch, step) order, folded
// into at most `max_points` points of consecutive rows: one index-ordered scan
// of the run's rows; a stored record is parsed only for each point's last row.
struct StepPointRow {
  int attempt = 0;  // of the bucket's last row
  int launch = 0;
  int64_t step = 0;
  int64_t first_step = 0;
  int steps = 0;  // rows in the bucket
  int ranks = 0;  // of the last row
  double loss = 0;  // the last row's loss_sum / ranks; NaN without ranks
  double loss_min = 0;  // finite mean losses of the bucket; NaN when none is finite
  double loss_max = 0;
  int64_t tokens = 0;  // sums over the bucket
  double step_seconds_sum = 0;
  double step_seconds = 0;  // the last row's step_seconds_max
  double step_seconds_max = 0;  // the bucket's largest
  // The last row's latest rank record (its last_json, read by the step
  // record's codec): its figures (phase times, MoE routing, checkpoint time)
  // are one rank's. Absent where the stored record does not decode.
  std::optional<StepRecord> last;
  WallTime updated;
};
struct StepSeries {
  int64_t total_steps = 0;  // the run's step rows
  int steps_per_point = 1;
  std::vector<StepPointRow> points;
};
absl::StatusOr<StepSeries> ReadStepSeries(Store& store, const std::string& run_id,
                                          int max_points);

// The ordered schema migrations (exposed for the migration test).
const std::vector<const char*>& Migrations();

}  // namespace trellis::controller
