#include "controller/store/store.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include <sqlite3.h>

#include "common/exit_codes.h"
#include "common/sha256.h"
#include "common/status.h"

namespace trellis::controller {
namespace {

constexpr const char* kRunColumns =
    "seq, run_id, name, user, spec_toml, run_dir, state, state_reason, nodes, ranks_per_node, "
    "restarts, not_before_ms, created_ms, updated_ms";
constexpr const char* kAttemptColumns =
    "run_id, attempt, slurm_job_id, launches, sbatch_args, nodelist, secret_sha256, exit_code, "
    "end_reason, submitted_ms, ended_ms, waiting, begin_ms";

// trellis_sha256(text): the hex digest, for migration 5.
void Sha256Function(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const unsigned char* text = sqlite3_value_text(argv[0]);
  std::string digest = Sha256Hex(text == nullptr ? "" : reinterpret_cast<const char*>(text));
  sqlite3_result_text(ctx, digest.c_str(), static_cast<int>(digest.size()), SQLITE_TRANSIENT);
}

absl::Status Migrate(sqlite::Db& db) {
  if (sqlite3_create_function(db.raw(), "trellis_sha256", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                              nullptr, Sha256Function, nullptr, nullptr) != SQLITE_OK)
    return absl::InternalError("cannot register trellis_sha256 on " + db.path());
  ASSIGN_OR_RETURN(auto version_stmt, db.Prepare("PRAGMA user_version"));
  ASSIGN_OR_RETURN(bool row, version_stmt.Step());
  int64_t version = row ? version_stmt.ColumnInt(0) : 0;
  const auto& migrations = Migrations();
  if (version > static_cast<int64_t>(migrations.size())) {
    return absl::FailedPreconditionError(
        "database " + db.path() + " has schema version " + std::to_string(version) +
        ", newer than this controller's " + std::to_string(migrations.size()) +
        "; run a newer trellis-controller");
  }
  for (size_t v = static_cast<size_t>(version); v < migrations.size(); ++v) {
    sqlite::Transaction tx(&db);
    RETURN_IF_ERROR(tx.status());
    RETURN_IF_ERROR(db.Exec(migrations[v]));
    RETURN_IF_ERROR(db.Exec("PRAGMA user_version = " + std::to_string(v + 1)));
    RETURN_IF_ERROR(tx.Commit());
  }
  return absl::OkStatus();
}

AttemptRecord ReadAttempt(sqlite::Statement& st) {
  AttemptRecord a;
  a.run_id = st.ColumnText(0);
  a.attempt = static_cast<int>(st.ColumnInt(1));
  a.slurm_job_id = st.ColumnText(2);
  a.launches = static_cast<int>(st.ColumnInt(3));
  auto args = nlohmann::json::parse(st.ColumnText(4), nullptr, false);
  if (args.is_array())
    for (const auto& x : args) a.sbatch_args.push_back(x.get<std::string>());
  a.nodelist = st.ColumnText(5);
  a.secret_sha256 = st.ColumnText(6);
  if (!st.ColumnIsNull(7)) a.exit_code = static_cast<int>(st.ColumnInt(7));
  a.end_reason = st.ColumnText(8);
  a.submitted = FromUnixMillis(st.ColumnInt(9));
  if (!st.ColumnIsNull(10)) a.ended = FromUnixMillis(st.ColumnInt(10));
  a.waiting = st.ColumnInt(11) != 0;
  if (!st.ColumnIsNull(12)) a.begin = FromUnixMillis(st.ColumnInt(12));
  return a;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                    sqlite::Journal journal,
                                                    sqlite::Db::CommitGuard may_commit) {
  ASSIGN_OR_RETURN(auto db, sqlite::Db::Open(path, journal, std::move(may_commit)));
  RETURN_IF_ERROR(Migrate(*db));
  return std::unique_ptr<Store>(new Store(std::move(db)));
}

absl::StatusOr<RunRecord> Store::ReadRun(sqlite::Statement& st) {
  RunRecord r;
  r.seq = st.ColumnInt(0);
  r.run_id = st.ColumnText(1);
  r.name = st.ColumnText(2);
  r.user = st.ColumnText(3);
  r.spec_toml = st.ColumnText(4);
  r.run_dir = st.ColumnText(5);
  auto state = ParseRunState(st.ColumnText(6));
  if (!state) return absl::DataLossError("run " + r.run_id + ": unknown state " + st.ColumnText(6));
  r.state = *state;
  r.state_reason = st.ColumnText(7);
  r.nodes = static_cast<int>(st.ColumnInt(8));
  r.ranks_per_node = static_cast<int>(st.ColumnInt(9));
  r.restarts = static_cast<int>(st.ColumnInt(10));
  r.not_before = FromUnixMillis(st.ColumnInt(11));
  r.created = FromUnixMillis(st.ColumnInt(12));
  r.updated = FromUnixMillis(st.ColumnInt(13));
  return r;
}

absl::StatusOr<RunRecord> Store::CreateRun(
    const std::string& name, const std::string& user, const std::string& spec_toml, int nodes,
    int ranks_per_node, const std::function<std::string(const std::string&)>& run_dir_for,
    WallTime now) {
  sqlite::Transaction tx(db_.get());
  RETURN_IF_ERROR(tx.status());
  ASSIGN_OR_RETURN(auto next, db_->Prepare("SELECT COALESCE(MAX(seq), 0) + 1 FROM runs"));
  ASSIGN_OR_RETURN(bool row, next.Step());
  int64_t seq = row ? next.ColumnInt(0) : 1;
  std::string run_id = name + "-" + std::to_string(seq);
  int64_t ms = ToUnixMillis(now);
  ASSIGN_OR_RETURN(auto ins, db_->Prepare(
      "INSERT INTO runs (seq, run_id, name, user, spec_toml, run_dir, state, state_reason, nodes, "
      "ranks_per_node, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, 'QUEUED', 'submitted', "
      "?, ?, ?, ?)"));
  RETURN_IF_ERROR(ins.Bind(1, seq).Bind(2, run_id).Bind(3, name).Bind(4, user).Bind(5, spec_toml)
                      .Bind(6, run_dir_for(run_id)).Bind(7, nodes).Bind(8, ranks_per_node)
                      .Bind(9, ms).Bind(10, ms).Run());
  ASSIGN_OR_RETURN(auto ev, db_->Prepare(
      "INSERT INTO run_events (run_id, unix_ms, from_state, to_state, reason) "
      "VALUES (?, ?, '', 'QUEUED', ?)"));
  RETURN_IF_ERROR(ev.Bind(1, run_id).Bind(2, ms).Bind(3, "submitted by " + user).Run());
  RETURN_IF_ERROR(tx.Commit());
  return GetRun(run_id);
}

absl::StatusOr<RunRecord> Store::GetRun(const std::string& run_id) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(std::string("SELECT ") + kRunColumns +
                                         " FROM runs WHERE run_id = ?"));
  st.Bind(1, run_id);
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::NotFoundError("no run '" + run_id + "'");
  return ReadRun(st);
}

absl::StatusOr<std::vector<RunRecord>> Store::ListRuns(int limit, bool active_only,
                                                      const std::string& user) {
  std::string sql = std::string("SELECT ") + kRunColumns + " FROM runs WHERE 1";
  if (active_only) sql += " AND state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')";
  if (!user.empty()) sql += " AND user = ?";
  sql += " ORDER BY seq DESC LIMIT ?";
  ASSIGN_OR_RETURN(auto st, db_->Prepare(sql));
  int arg = 1;
  if (!user.empty()) st.Bind(arg++, user);
  st.Bind(arg, limit);
  std::vector<RunRecord> runs;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(RunRecord r, ReadRun(st));
    runs.push_back(std::move(r));
  }
  return runs;
}

absl::StatusOr<std::map<RunState, int64_t>> Store::CountRunsByState() {
  ASSIGN_OR_RETURN(auto st, db_->Prepare("SELECT state, COUNT(*) FROM runs GROUP BY state"));
  std::map<RunState, int64_t> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    auto state = ParseRunState(st.ColumnText(0));
    if (!state) return absl::DataLossError("runs: unknown state " + st.ColumnText(0));
    out[*state] = st.ColumnInt(1);
  }
  return out;
}

absl::Status Store::Transition(const std::string& run_id, RunState to, const std::string& reason,
                               const std::string& evidence_json, WallTime now,
                               const std::function<absl::Status(Store&)>& also) {
  return Transitions(run_id, {Step{to, reason, evidence_json, also}}, now);
}

absl::Status Store::Transitions(const std::string& run_id, const std::vector<Step>& steps,
                                WallTime now) {
  sqlite::Transaction tx(db_.get());
  RETURN_IF_ERROR(tx.status());
  ASSIGN_OR_RETURN(RunRecord run, GetRun(run_id));
  int64_t ms = ToUnixMillis(now);
  RunState from = run.state;
  for (const Step& step : steps) {
    RETURN_IF_ERROR(CheckTransition(from, step.to));
    ASSIGN_OR_RETURN(auto up, db_->Prepare(
        "UPDATE runs SET state = ?, state_reason = ?, updated_ms = ? WHERE run_id = ?"));
    RETURN_IF_ERROR(
        up.Bind(1, StateName(step.to)).Bind(2, step.reason).Bind(3, ms).Bind(4, run_id).Run());
    ASSIGN_OR_RETURN(auto ev, db_->Prepare(
        "INSERT INTO run_events (run_id, unix_ms, from_state, to_state, reason, evidence_json) "
        "VALUES (?, ?, ?, ?, ?, ?)"));
    RETURN_IF_ERROR(ev.Bind(1, run_id).Bind(2, ms).Bind(3, StateName(from))
                        .Bind(4, StateName(step.to)).Bind(5, step.reason)
                        .Bind(6, step.evidence_json.empty() ? "{}" : step.evidence_json).Run());
    if (step.also) RETURN_IF_ERROR(step.also(*this));
    from = step.to;
  }
  return tx.Commit();
}

absl::Status Store::SetStateReason(const std::string& run_id, const std::string& reason) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare("UPDATE runs SET state_reason = ? WHERE run_id = ?"));
  return st.Bind(1, reason).Bind(2, run_id).Run();
}

absl::Status Store::NoteOnRun(const std::string& run_id, const std::string& note, WallTime now,
                              const std::optional<std::string>& spec_toml) {
  sqlite::Transaction tx(db_.get());
  RETURN_IF_ERROR(tx.status());
  ASSIGN_OR_RETURN(RunRecord run, GetRun(run_id));
  if (spec_toml) {
    ASSIGN_OR_RETURN(auto up, db_->Prepare("UPDATE runs SET spec_toml = ? WHERE run_id = ?"));
    RETURN_IF_ERROR(up.Bind(1, *spec_toml).Bind(2, run_id).Run());
  }
  ASSIGN_OR_RETURN(auto ev, db_->Prepare(
      "INSERT INTO run_events (run_id, unix_ms, from_state, to_state, reason, evidence_json) "
      "VALUES (?, ?, ?, ?, ?, '{}')"));
  RETURN_IF_ERROR(ev.Bind(1, run_id).Bind(2, ToUnixMillis(now)).Bind(3, StateName(run.state))
                      .Bind(4, StateName(run.state)).Bind(5, note).Run());
  return tx.Commit();
}

absl::Status Store::SetRestartBackoff(const std::string& run_id, int restarts,
                                      WallTime not_before) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "UPDATE runs SET restarts = ?, not_before_ms = ? WHERE run_id = ?"));
  return st.Bind(1, restarts).Bind(2, ToUnixMillis(not_before)).Bind(3, run_id).Run();
}

absl::Status Store::CreateAttempt(const AttemptRecord& a) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "INSERT INTO attempts (run_id, attempt, slurm_job_id, launches, sbatch_args, secret_sha256, "
      "submitted_ms, waiting, begin_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  st.Bind(1, a.run_id).Bind(2, a.attempt).Bind(3, a.slurm_job_id).Bind(4, a.launches)
      .Bind(5, nlohmann::json(a.sbatch_args).dump()).Bind(6, a.secret_sha256)
      .Bind(7, ToUnixMillis(a.submitted)).Bind(8, a.waiting ? 1 : 0);
  if (a.begin) st.Bind(9, ToUnixMillis(*a.begin));
  return st.Run();
}

absl::Status Store::TakeUpWaitingAttempt(const std::string& run_id, int attempt,
                                         std::optional<WallTime> begin) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "UPDATE attempts SET waiting = 0, begin_ms = COALESCE(?, begin_ms) WHERE run_id = ? "
      "AND attempt = ? AND waiting = 1 AND ended_ms IS NULL"));
  if (begin) st.Bind(1, ToUnixMillis(*begin));
  RETURN_IF_ERROR(st.Bind(2, run_id).Bind(3, attempt).Run());
  if (db_->Changes() != 1)
    return absl::FailedPreconditionError("run " + run_id + " attempt " + std::to_string(attempt) +
                                         " is not waiting");
  return absl::OkStatus();
}

absl::Status Store::SetAttemptJob(const std::string& run_id, int attempt,
                                  const std::string& job_id) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "UPDATE attempts SET slurm_job_id = ? WHERE run_id = ? AND attempt = ?"));
  return st.Bind(1, job_id).Bind(2, run_id).Bind(3, attempt).Run();
}

absl::Status Store::SetAttemptNodes(const std::string& run_id, int attempt,
                                    const std::string& nodes) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "UPDATE attempts SET nodelist = ? WHERE run_id = ? AND attempt = ?"));
  return st.Bind(1, nodes).Bind(2, run_id).Bind(3, attempt).Run();
}

absl::Status Store::SetAttemptLaunches(const std::string& run_id, int attempt, int launches) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "UPDATE attempts SET launches = ? WHERE run_id = ? AND attempt = ?"));
  return st.Bind(1, launches).Bind(2, run_id).Bind(3, attempt).Run();
}

absl::Status Store::EndAttempt(const std::string& run_id, int attempt, int exit_code,
                               const std::string& reason, WallTime now) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "UPDATE attempts SET exit_code = ?, end_reason = ?, ended_ms = ? "
      "WHERE run_id = ? AND attempt = ? AND ended_ms IS NULL"));
  RETURN_IF_ERROR(st.Bind(1, exit_code).Bind(2, reason).Bind(3, ToUnixMillis(now))
                      .Bind(4, run_id).Bind(5, attempt).Run());
  // A launch still open when its attempt ends (a cancel; an end the controller
  // learned from Slurm after a restart) ends with it: cancelled, succeeded
  // with the job, or left unclassified with the attempt's reason, and with
  // the attempt's exit code where it had none (a cancel's 130, not 0).
  const char* cls = exit_code == kExitCancelled ? "cancel" : exit_code == 0 ? "succeeded" : "";
  ASSIGN_OR_RETURN(auto launches, db_->Prepare(
      "UPDATE launches SET ended_ms = ?, "
      "failure_class = CASE WHEN failure_class = '' THEN ? ELSE failure_class END, "
      "reason = CASE WHEN reason = '' THEN ? ELSE reason END, "
      "exit_code = COALESCE(exit_code, ?) "
      "WHERE run_id = ? AND attempt = ? AND ended_ms IS NULL"));
  return launches.Bind(1, ToUnixMillis(now)).Bind(2, std::string(cls)).Bind(3, reason)
      .Bind(4, exit_code).Bind(5, run_id).Bind(6, attempt).Run();
}

absl::StatusOr<std::vector<AttemptRecord>> Store::Attempts(const std::string& run_id) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(std::string("SELECT ") + kAttemptColumns +
                                         " FROM attempts WHERE run_id = ? ORDER BY attempt"));
  st.Bind(1, run_id);
  std::vector<AttemptRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(ReadAttempt(st));
  }
  return out;
}

absl::StatusOr<std::optional<AttemptRecord>> Store::LatestAttempt(const std::string& run_id) {
  ASSIGN_OR_RETURN(auto all, Attempts(run_id));
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (!it->waiting) return std::optional<AttemptRecord>(*it);
  return std::optional<AttemptRecord>();
}

absl::StatusOr<std::vector<EventRecord>> Store::Events(const std::string& run_id) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "SELECT unix_ms, from_state, to_state, reason, evidence_json FROM run_events "
      "WHERE run_id = ? ORDER BY id"));
  st.Bind(1, run_id);
  std::vector<EventRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    EventRecord e;
    e.time = FromUnixMillis(st.ColumnInt(0));
    // The creation event has no "from": shown as QUEUED -> QUEUED.
    e.from = ParseRunState(st.ColumnText(1)).value_or(RunState::kQueued);
    e.to = ParseRunState(st.ColumnText(2)).value_or(RunState::kQueued);
    e.reason = st.ColumnText(3);
    e.evidence_json = st.ColumnText(4);
    out.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<std::vector<StepRow>> Store::RecentSteps(const std::string& run_id, int limit) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "SELECT attempt, launch, step, ranks, loss_sum, tokens, step_seconds_max, last_json "
      "FROM steps WHERE run_id = ? ORDER BY attempt DESC, launch DESC, step DESC LIMIT ?"));
  st.Bind(1, run_id).Bind(2, limit);
  std::vector<StepRow> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back({static_cast<int>(st.ColumnInt(0)), static_cast<int>(st.ColumnInt(1)),
                   st.ColumnInt(2), static_cast<int>(st.ColumnInt(3)), st.ColumnDouble(4),
                   st.ColumnInt(5), st.ColumnDouble(6), st.ColumnText(7)});
  }
  std::reverse(out.begin(), out.end());
  return out;
}

namespace {

struct StepFound {
  StepMark mark;
  double seconds = 0;  // the slowest rank's step time
};

// The newest step of a launch below `limit`, with `below` prepared by
// Store::GoodputSteps.
absl::StatusOr<std::optional<StepFound>> NewestBelow(sqlite::Statement& below,
                                                     const std::string& run_id,
                                                     const LaunchSteps& l, int64_t limit) {
  below.Bind(1, run_id).Bind(2, l.attempt).Bind(3, l.launch).Bind(4, limit);
  ASSIGN_OR_RETURN(bool row, below.Step());
  std::optional<StepFound> out;
  if (row)
    out =
        StepFound{{below.ColumnInt(0), FromUnixMillis(below.ColumnInt(1))}, below.ColumnDouble(2)};
  below.Reset();
  return out;
}

}  // namespace

absl::StatusOr<std::vector<LaunchSteps>> Store::GoodputSteps(const std::string& run_id) {
  // Each lookup is a seek on the primary key (run_id, attempt, launch, step).
  ASSIGN_OR_RETURN(auto next, db_->Prepare(
      "SELECT attempt, launch, step, updated_ms FROM steps WHERE run_id = ? "
      "AND (attempt, launch) > (?, ?) ORDER BY attempt, launch, step LIMIT 1"));
  ASSIGN_OR_RETURN(auto below, db_->Prepare(
      "SELECT step, updated_ms, step_seconds_max FROM steps WHERE run_id = ? AND attempt = ? "
      "AND launch = ? AND step < ? ORDER BY step DESC LIMIT 1"));
  std::vector<LaunchSteps> out;
  int64_t attempt = -1, launch = -1;
  while (true) {  // each launch's first step
    next.Bind(1, run_id).Bind(2, attempt).Bind(3, launch);
    ASSIGN_OR_RETURN(bool row, next.Step());
    if (!row) break;
    attempt = next.ColumnInt(0);
    launch = next.ColumnInt(1);
    LaunchSteps l;
    l.attempt = static_cast<int>(attempt);
    l.launch = static_cast<int>(launch);
    l.marks.push_back({next.ColumnInt(2), FromUnixMillis(next.ColumnInt(3))});
    out.push_back(std::move(l));
    next.Reset();
  }
  // Walking back: each launch's newest step below the later launches' lowest
  // first step (its newest kept), then its last step.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  int64_t redo_from = kNone;
  for (size_t i = out.size(); i-- > 0;) {
    LaunchSteps& l = out[i];
    const int64_t first = l.marks.front().step;
    if (redo_from != kNone) {
      ASSIGN_OR_RETURN(auto kept, NewestBelow(below, run_id, l, redo_from));
      if (kept && kept->mark.step > l.marks.back().step) l.marks.push_back(kept->mark);
    }
    ASSIGN_OR_RETURN(auto last, NewestBelow(below, run_id, l, kNone));
    if (last && last->mark.step > l.marks.back().step) l.marks.push_back(last->mark);
    if (last)
      l.last_step_time = std::chrono::duration_cast<WallTime::duration>(
          std::chrono::duration<double>(std::max(last->seconds, 0.0)));
    redo_from = std::min(redo_from, first);
  }
  return out;
}

}  // namespace trellis::controller
