// The store's quarantine list and gate records.
#include "common/status.h"
#include "controller/store/store.h"

namespace trellis::controller {
namespace {

constexpr const char* kNodeColumns =
    "name, reason, evidence_json, actor, since_ms, expiry_ms, strikes, released_ms, "
    "check_job_id, check_started_ms, check_ended_ms, check_passed, check_summary";

QuarantineEntry ReadEntry(sqlite::Statement& st) {
  QuarantineEntry e;
  e.node = st.ColumnText(0);
  e.reason = st.ColumnText(1);
  e.evidence_json = st.ColumnText(2);
  e.actor = st.ColumnText(3);
  e.since = FromUnixMillis(st.ColumnInt(4));
  if (!st.ColumnIsNull(5)) e.expiry = FromUnixMillis(st.ColumnInt(5));
  e.strikes = static_cast<int>(st.ColumnInt(6));
  if (!st.ColumnIsNull(7)) e.released = FromUnixMillis(st.ColumnInt(7));
  if (!st.ColumnIsNull(9)) {
    NodeCheck c;
    c.job_id = st.ColumnText(8);
    c.started = FromUnixMillis(st.ColumnInt(9));
    if (!st.ColumnIsNull(10)) c.ended = FromUnixMillis(st.ColumnInt(10));
    c.passed = st.ColumnInt(11) != 0;
    c.summary = st.ColumnText(12);
    e.last_check = c;
  }
  return e;
}

}  // namespace

absl::StatusOr<std::vector<QuarantineEntry>> Store::QuarantineEntries() {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(std::string("SELECT ") + kNodeColumns +
                                         " FROM nodes ORDER BY name"));
  std::vector<QuarantineEntry> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(ReadEntry(st));
  }
  return out;
}

absl::StatusOr<std::optional<QuarantineEntry>> Store::FindQuarantine(const std::string& node) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(std::string("SELECT ") + kNodeColumns +
                                         " FROM nodes WHERE name = ?"));
  st.Bind(1, node);
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<QuarantineEntry>();
  return std::optional<QuarantineEntry>(ReadEntry(st));
}

absl::Status Store::PutQuarantine(const QuarantineEntry& e) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "INSERT INTO nodes (name, state, reason, evidence_json, actor, since_ms, expiry_ms, strikes, "
      "released_ms) VALUES (?, 'quarantine', ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
      "reason = excluded.reason, evidence_json = excluded.evidence_json, actor = excluded.actor, "
      "since_ms = excluded.since_ms, expiry_ms = excluded.expiry_ms, strikes = excluded.strikes, "
      "released_ms = excluded.released_ms"));
  st.Bind(1, e.node).Bind(2, e.reason).Bind(3, e.evidence_json.empty() ? "{}" : e.evidence_json)
      .Bind(4, e.actor).Bind(5, ToUnixMillis(e.since)).Bind(7, e.strikes);
  if (e.expiry)
    st.Bind(6, ToUnixMillis(*e.expiry));
  else
    st.BindNull(6);
  if (e.released)
    st.Bind(8, ToUnixMillis(*e.released));
  else
    st.BindNull(8);
  RETURN_IF_ERROR(st.Run());
  if (!e.last_check) return absl::OkStatus();
  return SetNodeCheck(e.node, *e.last_check);
}

absl::Status Store::SetNodeCheck(const std::string& node, const NodeCheck& c) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "UPDATE nodes SET check_job_id = ?, check_started_ms = ?, check_ended_ms = ?, "
      "check_passed = ?, check_summary = ? WHERE name = ?"));
  st.Bind(1, c.job_id).Bind(2, ToUnixMillis(c.started)).Bind(4, c.passed ? 1 : 0)
      .Bind(5, c.summary).Bind(6, node);
  if (c.ended)
    st.Bind(3, ToUnixMillis(*c.ended));
  else
    st.BindNull(3);
  RETURN_IF_ERROR(st.Run());
  if (db_->Changes() == 0) return absl::NotFoundError("node " + node + " has no quarantine entry");
  return absl::OkStatus();
}

absl::Status Store::ForgetNode(const std::string& node) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare("DELETE FROM nodes WHERE name = ?"));
  st.Bind(1, node);
  return st.Run();
}

absl::Status Store::AddGateRecord(const std::string& run_id, const GateRecordRow& r) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "INSERT INTO gate_records (run_id, attempt, launch, unix_ms, decision, reason, policy_json, "
      "nodes_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
  return st.Bind(1, run_id).Bind(2, r.attempt).Bind(3, r.launch).Bind(4, ToUnixMillis(r.time))
      .Bind(5, r.decision).Bind(6, r.reason).Bind(7, r.policy_json).Bind(8, r.nodes_json).Run();
}

absl::StatusOr<std::vector<GateRecordRow>> Store::GateRecords(const std::string& run_id,
                                                              int attempt) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "SELECT attempt, launch, unix_ms, decision, reason, policy_json, nodes_json FROM "
      "gate_records WHERE run_id = ? AND (? = 0 OR attempt = ?) ORDER BY id"));
  st.Bind(1, run_id).Bind(2, attempt).Bind(3, attempt);
  std::vector<GateRecordRow> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back({static_cast<int>(st.ColumnInt(0)), static_cast<int>(st.ColumnInt(1)),
                   FromUnixMillis(st.ColumnInt(2)), st.ColumnText(3), st.ColumnText(4),
                   st.ColumnText(5), st.ColumnText(6)});
  }
  return out;
}

}  // namespace trellis::controller
