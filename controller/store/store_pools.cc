// Spare pool jobs (restart.spare_pool_nodes; docs/architecture.md, "Spare pool").
#include "common/status.h"
#include "controller/store/store.h"

namespace trellis::controller {

absl::Status Store::PutPoolJob(const PoolJobRecord& p) {
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      "INSERT OR REPLACE INTO pool_jobs (run_id, pool, job_name, job_id, nodes_asked, nodelist, "
      "submitted_ms, standing_ms, drawn_attempt, drawn_launch, ended_ms, end_reason, "
      "secret_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  st.Bind(1, p.run_id).Bind(2, p.pool).Bind(3, p.job_name).Bind(4, p.job_id)
      .Bind(5, p.nodes_asked).Bind(6, p.nodelist).Bind(7, ToUnixMillis(p.submitted));
  if (p.standing_since)
    st.Bind(8, ToUnixMillis(*p.standing_since));
  else
    st.BindNull(8);
  st.Bind(9, p.drawn_attempt).Bind(10, p.drawn_launch);
  if (p.ended)
    st.Bind(11, ToUnixMillis(*p.ended));
  else
    st.BindNull(11);
  return st.Bind(12, p.end_reason).Bind(13, p.secret_sha256).Run();
}

absl::StatusOr<std::vector<PoolJobRecord>> Store::PoolJobs(const std::string& run_id) {
  const std::string columns =
      "SELECT run_id, pool, job_name, job_id, nodes_asked, nodelist, submitted_ms, standing_ms, "
      "drawn_attempt, drawn_launch, ended_ms, end_reason, secret_sha256 FROM pool_jobs ";
  ASSIGN_OR_RETURN(auto st, db_->Prepare(
      columns + (run_id.empty() ? "WHERE ended_ms IS NULL ORDER BY run_id, pool"
                                : "WHERE run_id = ? ORDER BY pool")));
  if (!run_id.empty()) st.Bind(1, run_id);
  std::vector<PoolJobRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    PoolJobRecord p;
    p.run_id = st.ColumnText(0);
    p.pool = static_cast<int>(st.ColumnInt(1));
    p.job_name = st.ColumnText(2);
    p.job_id = st.ColumnText(3);
    p.nodes_asked = static_cast<int>(st.ColumnInt(4));
    p.nodelist = st.ColumnText(5);
    p.submitted = FromUnixMillis(st.ColumnInt(6));
    if (!st.ColumnIsNull(7)) p.standing_since = FromUnixMillis(st.ColumnInt(7));
    p.drawn_attempt = static_cast<int>(st.ColumnInt(8));
    p.drawn_launch = static_cast<int>(st.ColumnInt(9));
    if (!st.ColumnIsNull(10)) p.ended = FromUnixMillis(st.ColumnInt(10));
    p.end_reason = st.ColumnText(11);
    p.secret_sha256 = st.ColumnText(12);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace trellis::controller
