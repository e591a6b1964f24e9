// `trellis report`'s step history: a run's step summaries folded into a
// bounded number of points (docs/architecture.md, "Store").
#include <cmath>
#include <limits>

#include "common/status.h"
#include "common/step_record.h"
#include "controller/store/store.h"

namespace trellis::controller {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Folds one row into its bucket's point (rows arrive in order).
void Fold(StepPointRow* p, int attempt, int launch, int64_t step, int ranks, double loss_sum,
          int64_t tokens, double seconds, int64_t updated_ms) {
  double loss = ranks > 0 ? loss_sum / ranks : kNaN;
  if (p->steps == 0) {
    p->first_step = step;
    p->loss_min = p->loss_max = kNaN;
  }
  ++p->steps;
  p->attempt = attempt;
  p->launch = launch;
  p->step = step;
  p->ranks = ranks;
  p->loss = loss;
  if (std::isfinite(loss)) {
    p->loss_min = std::isnan(p->loss_min) ? loss : std::min(p->loss_min, loss);
    p->loss_max = std::isnan(p->loss_max) ? loss : std::max(p->loss_max, loss);
  }
  p->tokens += tokens;
  p->step_seconds_sum += seconds;
  p->step_seconds = seconds;
  p->step_seconds_max = p->steps == 1 ? seconds : std::max(p->step_seconds_max, seconds);
  p->updated = FromUnixMillis(updated_ms);
}

// One snapshot for the count and the scan: the step pipeline commits rows
// from a connection of its own meanwhile. A deferred transaction only reads,
// so it never waits for that writer.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(sqlite::Db& db) : db_(db), begun_(db.Exec("BEGIN DEFERRED")) {}
  ~ReadSnapshot() {
    if (begun_.ok()) db_.Exec("COMMIT").IgnoreError();
  }
  const absl::Status& status() const { return begun_; }

 private:
  sqlite::Db& db_;
  absl::Status begun_;
};

}  // namespace

absl::StatusOr<StepSeries> ReadStepSeries(Store& store, const std::string& run_id, int max_points) {
  if (max_points < 1) return absl::InvalidArgumentError("max_points: must be at least 1");
  ReadSnapshot snapshot(store.db());
  RETURN_IF_ERROR(snapshot.status());
  ASSIGN_OR_RETURN(auto count, store.db().Prepare("SELECT COUNT(*) FROM steps WHERE run_id = ?"));
  count.Bind(1, run_id);
  ASSIGN_OR_RETURN(bool counted, count.Step());
  StepSeries out;
  out.total_steps = counted ? count.ColumnInt(0) : 0;
  if (out.total_steps == 0) return out;
  const int64_t per_point = (out.total_steps + max_points - 1) / max_points;
  out.steps_per_point = static_cast<int>(per_point);
  out.points.reserve(static_cast<size_t>((out.total_steps + per_point - 1) / per_point));

  // The primary key (run_id, attempt, launch, step) gives the order: an index scan.
  ASSIGN_OR_RETURN(
      auto rows,
      store.db().Prepare(
          "SELECT attempt, launch, step, ranks, loss_sum, tokens, step_seconds_max, updated_ms, "
          "last_json FROM steps WHERE run_id = ? ORDER BY attempt, launch, step"));
  rows.Bind(1, run_id);
  for (int64_t i = 0; i < out.total_steps; ++i) {
    ASSIGN_OR_RETURN(bool row, rows.Step());
    if (!row) break;
    if (i % per_point == 0) out.points.emplace_back();
    StepPointRow& p = out.points.back();
    Fold(&p, static_cast<int>(rows.ColumnInt(0)), static_cast<int>(rows.ColumnInt(1)),
         rows.ColumnInt(2), static_cast<int>(rows.ColumnInt(3)), rows.ColumnDouble(4),
         rows.ColumnInt(5), rows.ColumnDouble(6), rows.ColumnInt(7));
    // Only a point's last row keeps its phases: parse that row's record alone.
    bool last_of_point = (i + 1) % per_point == 0 || i + 1 == out.total_steps;
    // The record was checked when it arrived: one that no longer decodes (a
    // hand-edited row) leaves the point without figures rather than failing the report.
    std::string error;
    if (last_of_point) p.last = DecodeStepRecord(rows.ColumnText(8), &error);
  }
  return out;
}

}  // namespace trellis::controller
