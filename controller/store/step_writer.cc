#include "controller/store/step_writer.h"

#include "common/status.h"

namespace trellis::controller {

namespace {
constexpr size_t kMaxCachedSources = 200000;
}  // namespace

absl::StatusOr<std::unique_ptr<StepWriter>> StepWriter::Open(const std::string& db_path,
                                                             sqlite::Journal journal,
                                                             sqlite::Db::CommitGuard may_commit) {
  ASSIGN_OR_RETURN(auto db, sqlite::Db::Open(db_path, journal, std::move(may_commit)));
  ASSIGN_OR_RETURN(auto last_seq,
                   db->Prepare("SELECT last_seq FROM step_batches WHERE run_id = ? AND "
                               "attempt = ? AND launch = ? AND node = ?"));
  ASSIGN_OR_RETURN(auto put_seq,
                   db->Prepare("INSERT INTO step_batches (run_id, attempt, launch, node, "
                               "last_seq) VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, attempt, "
                               "launch, node) DO UPDATE SET last_seq = excluded.last_seq"));
  ASSIGN_OR_RETURN(auto upsert, db->Prepare(
      "INSERT INTO steps (run_id, attempt, launch, step, ranks, loss_sum, tokens, "
      "step_seconds_max, last_json, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
      "ON CONFLICT (run_id, attempt, launch, step) DO UPDATE SET "
      "ranks = ranks + excluded.ranks, loss_sum = loss_sum + excluded.loss_sum, "
      "tokens = tokens + excluded.tokens, "
      "step_seconds_max = MAX(step_seconds_max, excluded.step_seconds_max), "
      "last_json = excluded.last_json, updated_ms = excluded.updated_ms "
      "RETURNING attempt, launch, step, ranks, loss_sum, tokens, step_seconds_max, last_json"));
  return std::unique_ptr<StepWriter>(new StepWriter(std::move(db), std::move(last_seq),
                                                    std::move(put_seq), std::move(upsert)));
}

absl::StatusOr<uint64_t> StepWriter::LastSeq(const BatchSource& source) {
  if (auto it = seqs_.find(source); it != seqs_.end()) return it->second;
  last_seq_.Bind(1, source.run_id).Bind(2, source.attempt).Bind(3, source.launch)
      .Bind(4, source.node);
  ASSIGN_OR_RETURN(bool row, last_seq_.Step());
  uint64_t seq = row ? static_cast<uint64_t>(last_seq_.ColumnInt(0)) : 0;
  last_seq_.Reset();
  if (seqs_.size() >= kMaxCachedSources) seqs_.clear();
  seqs_[source] = seq;
  return seq;
}

absl::StatusOr<StepWriter::Outcome> StepWriter::Commit(
    const std::vector<const StepBatch*>& batches, WallTime now) {
  Outcome out;
  // The cache as it was, to put back if the transaction fails.
  std::map<BatchSource, uint64_t> before;
  auto restore = [&] {
    for (auto& [source, seq] : before) seqs_[source] = seq;
  };
  sqlite::Transaction tx(db_.get());
  RETURN_IF_ERROR(tx.status());
  std::map<StepKey, StepDelta> deltas;
  for (const StepBatch* b : batches) {
    auto last = LastSeq(b->source);
    if (!last.ok()) {
      restore();
      return last.status();
    }
    if (b->seq <= *last) {
      out.results.push_back(BatchResult::kDuplicate);
      continue;
    }
    before.emplace(b->source, *last);
    seqs_[b->source] = b->seq;
    FoldBatch(*b, &deltas);
    out.results.push_back(BatchResult::kStored);
  }
  auto write = [&]() -> absl::Status {
    for (const auto& [source, old] : before) {
      put_seq_.Bind(1, source.run_id).Bind(2, source.attempt).Bind(3, source.launch)
          .Bind(4, source.node).Bind(5, static_cast<int64_t>(seqs_[source]));
      RETURN_IF_ERROR(put_seq_.Run());
    }
    for (const auto& [key, d] : deltas) {
      upsert_.Bind(1, key.run_id).Bind(2, key.attempt).Bind(3, key.launch).Bind(4, key.step)
          .Bind(5, d.ranks).Bind(6, d.loss_sum).Bind(7, d.tokens).Bind(8, d.step_seconds_max)
          .Bind(9, EncodeStepRecord(d.last)).Bind(10, ToUnixMillis(now));
      ASSIGN_OR_RETURN(bool row, upsert_.Step());
      if (!row) return absl::InternalError("step upsert returned no row");
      out.rows.push_back(
          {key.run_id,
           {static_cast<int>(upsert_.ColumnInt(0)), static_cast<int>(upsert_.ColumnInt(1)),
            upsert_.ColumnInt(2), static_cast<int>(upsert_.ColumnInt(3)),
            upsert_.ColumnDouble(4), upsert_.ColumnInt(5), upsert_.ColumnDouble(6),
            upsert_.ColumnText(7)}});
      upsert_.Reset();
    }
    return tx.Commit();
  };
  if (absl::Status st = write(); !st.ok()) {
    upsert_.Reset();
    restore();
    return st;
  }
  for (const auto& [key, d] : deltas) {
    int64_t& newest = written_[key.run_id];
    newest = std::max(newest, key.step);
  }
  return out;
}

absl::StatusOr<int64_t> StepWriter::Prune(const StepRetention& retention) {
  if (retention.keep_full <= 0 || retention.thin_every <= 0)
    return absl::InvalidArgumentError("step retention: keep_full and thin_every must be >= 1");
  ASSIGN_OR_RETURN(auto del, db_->Prepare(
      "DELETE FROM steps WHERE run_id = ?1 AND step < ?2 AND step % ?3 != 0 "
      "AND (attempt, launch, step) NOT IN (SELECT attempt, launch, MIN(step) FROM steps "
      "WHERE run_id = ?1 GROUP BY attempt, launch) "
      "AND (attempt, launch, step) NOT IN (SELECT attempt, launch, MAX(step) FROM steps "
      "WHERE run_id = ?1 GROUP BY attempt, launch)"));
  int64_t deleted = 0;
  std::map<std::string, int64_t> runs;
  runs.swap(written_);
  auto prune_run = [&](const std::string& run_id, int64_t newest) -> absl::Status {
    sqlite::Transaction tx(db_.get());
    RETURN_IF_ERROR(tx.status());
    del.Bind(1, run_id).Bind(2, newest - retention.keep_full).Bind(3, retention.thin_every);
    RETURN_IF_ERROR(del.Run());
    deleted += db_->Changes();
    return tx.Commit();
  };
  for (auto it = runs.begin(); it != runs.end(); ++it) {
    if (it->second < retention.keep_full) continue;
    if (absl::Status st = prune_run(it->first, it->second); !st.ok()) {
      // Those not pruned are tried again next time.
      for (; it != runs.end(); ++it) written_[it->first] = std::max(written_[it->first], it->second);
      return st;
    }
  }
  return deleted;
}

}  // namespace trellis::controller
