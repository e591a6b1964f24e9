// Launches (how each srun step of an attempt ended) and health events.
#include "common/status.h"
#include "controller/store/store.h"

namespace trellis::controller {
namespace {

constexpr const char* kLaunchColumns =
    "run_id, attempt, launch, nodes, started_ms, ended_ms, failure_class, exit_code, reason, "
    "blamed_node, evidence_json, recovery, go_json, next_nodes";

// The rows of a SELECT of kLaunchColumns.
absl::StatusOr<std::vector<LaunchRecord>> ReadLaunchRows(sqlite::Statement& st) {
  std::vector<LaunchRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    LaunchRecord l;
    l.run_id = st.ColumnText(0);
    l.attempt = static_cast<int>(st.ColumnInt(1));
    l.launch = static_cast<int>(st.ColumnInt(2));
    l.nodes = st.ColumnText(3);
    l.started = FromUnixMillis(st.ColumnInt(4));
    if (!st.ColumnIsNull(5)) l.ended = FromUnixMillis(st.ColumnInt(5));
    l.failure_class = st.ColumnText(6);
    if (!st.ColumnIsNull(7)) l.exit_code = static_cast<int>(st.ColumnInt(7));
    l.reason = st.ColumnText(8);
    l.blamed_node = st.ColumnText(9);
    l.evidence_json = st.ColumnText(10);
    l.recovery = st.ColumnText(11);
    l.go_json = st.ColumnText(12);
    l.next_nodes = st.ColumnText(13);
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace

absl::Status Store::PutLaunch(const LaunchRecord& l) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "INSERT INTO launches (run_id, attempt, launch, nodes, started_ms, ended_ms, "
      "failure_class, exit_code, reason, blamed_node, evidence_json, recovery, go_json, "
      "next_nodes) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
      "ON CONFLICT (run_id, attempt, launch) DO UPDATE SET nodes = excluded.nodes, "
      "started_ms = excluded.started_ms, ended_ms = excluded.ended_ms, "
      "failure_class = excluded.failure_class, exit_code = excluded.exit_code, "
      "reason = excluded.reason, blamed_node = excluded.blamed_node, "
      "evidence_json = excluded.evidence_json, recovery = excluded.recovery, "
      "next_nodes = excluded.next_nodes, "
      "go_json = CASE WHEN excluded.go_json = '' THEN go_json ELSE excluded.go_json END"));
  st.Bind(1, l.run_id).Bind(2, l.attempt).Bind(3, l.launch).Bind(4, l.nodes)
      .Bind(5, ToUnixMillis(l.started));
  if (l.ended)
    st.Bind(6, ToUnixMillis(*l.ended));
  else
    st.BindNull(6);
  st.Bind(7, l.failure_class);
  if (l.exit_code)
    st.Bind(8, *l.exit_code);
  else
    st.BindNull(8);
  return st.Bind(9, l.reason).Bind(10, l.blamed_node)
      .Bind(11, l.evidence_json.empty() ? "{}" : l.evidence_json).Bind(12, l.recovery)
      .Bind(13, l.go_json).Bind(14, l.next_nodes).Run();
}

absl::StatusOr<std::vector<LaunchRecord>> Store::Launches(const std::string& run_id) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "SELECT " + std::string(kLaunchColumns) + " FROM launches WHERE run_id = ? "
      "ORDER BY attempt, launch"));
  st.Bind(1, run_id);
  return ReadLaunchRows(st);
}

absl::StatusOr<std::vector<LaunchRecord>> Store::LaunchesEndedSince(
    WallTime since, const std::string& failure_class) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "SELECT " + std::string(kLaunchColumns) + " FROM launches WHERE failure_class = ? AND "
      "ended_ms >= ? ORDER BY ended_ms"));
  st.Bind(1, failure_class).Bind(2, ToUnixMillis(since));
  return ReadLaunchRows(st);
}

absl::Status Store::PutWorkerReport(const WorkerReportRecord& r) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "INSERT OR REPLACE INTO worker_reports (run_id, attempt, launch, node, unix_ms, exit_code, "
      "reason, oom_kills, time_limit_warned, ranks_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  return st.Bind(1, r.run_id).Bind(2, r.attempt).Bind(3, r.launch).Bind(4, r.node)
      .Bind(5, ToUnixMillis(r.time)).Bind(6, r.exit_code).Bind(7, r.reason)
      .Bind(8, r.oom_kills).Bind(9, r.time_limit_warned ? 1 : 0)
      .Bind(10, r.ranks_json.empty() ? "[]" : r.ranks_json).Run();
}

absl::StatusOr<std::vector<WorkerReportRecord>> Store::WorkerReports(const std::string& run_id,
                                                                     int attempt, int launch) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "SELECT node, unix_ms, exit_code, reason, oom_kills, time_limit_warned, ranks_json FROM "
      "worker_reports WHERE run_id = ? AND attempt = ? AND launch = ? ORDER BY unix_ms, node"));
  st.Bind(1, run_id).Bind(2, attempt).Bind(3, launch);
  std::vector<WorkerReportRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    WorkerReportRecord r;
    r.run_id = run_id;
    r.attempt = attempt;
    r.launch = launch;
    r.node = st.ColumnText(0);
    r.time = FromUnixMillis(st.ColumnInt(1));
    r.exit_code = static_cast<int>(st.ColumnInt(2));
    r.reason = st.ColumnText(3);
    r.oom_kills = static_cast<int>(st.ColumnInt(4));
    r.time_limit_warned = st.ColumnInt(5) != 0;
    r.ranks_json = st.ColumnText(6);
    out.push_back(std::move(r));
  }
  return out;
}

absl::Status Store::AddHealthEvent(const HealthEventRecord& e) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "INSERT INTO health_events (run_id, attempt, launch, unix_ms, kind, rank, node, detail, "
      "detail_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  return st.Bind(1, e.run_id).Bind(2, e.attempt).Bind(3, e.launch).Bind(4, ToUnixMillis(e.time))
      .Bind(5, e.kind).Bind(6, e.rank).Bind(7, e.node).Bind(8, e.detail)
      .Bind(9, e.detail_json.empty() ? "{}" : e.detail_json).Run();
}

absl::StatusOr<std::vector<HealthEventRecord>> Store::HealthEvents(const std::string& run_id,
                                                                   int limit) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "SELECT attempt, launch, unix_ms, kind, rank, node, detail, detail_json FROM "
      "(SELECT * FROM health_events WHERE run_id = ? ORDER BY id DESC LIMIT ?) ORDER BY id"));
  st.Bind(1, run_id).Bind(2, limit);
  std::vector<HealthEventRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back({run_id, static_cast<int>(st.ColumnInt(0)), static_cast<int>(st.ColumnInt(1)),
                   FromUnixMillis(st.ColumnInt(2)), st.ColumnText(3),
                   static_cast<int>(st.ColumnInt(4)), st.ColumnText(5), st.ColumnText(6),
                   st.ColumnText(7)});
  }
  return out;
}

absl::StatusOr<std::set<int>> Store::RanksWithEvents(const std::string& run_id, int attempt,
                                                    int launch, const std::string& kind,
                                                    const std::string& ended_by) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "SELECT rank, kind FROM health_events WHERE run_id = ? AND attempt = ? AND launch = ? "
      "AND kind IN (?, ?) ORDER BY id"));
  st.Bind(1, run_id).Bind(2, attempt).Bind(3, launch).Bind(4, kind).Bind(5, ended_by);
  std::set<int> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    const int rank = static_cast<int>(st.ColumnInt(0));
    if (st.ColumnText(1) == kind)
      out.insert(rank);
    else
      out.erase(rank);
  }
  return out;
}

}  // namespace trellis::controller
