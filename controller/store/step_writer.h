#pragma once
// The one writer of step records: batches from the workers, many per
// transaction, on the ingest thread with a connection of its own (the
// loop thread's Store keeps its own; SQLite's WAL lets both read while one
// writes). A batch is stored whole or not at all, and once: the newest seq
// stored per launch and node is kept in step_batches in the same transaction,
// so a batch sent again is known. Prunes old step rows by the retention
// policy (docs/architecture.md, "The step pipeline").

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/sqlite.h"
#include "controller/core/step_batch.h"
#include "controller/store/records.h"

namespace trellis::controller {

// Every step of a run's newest `keep_full` steps is kept; older steps only
// where step % thin_every == 0, plus each launch's first and last step (what
// goodput needs; its lost-progress figure for old launches becomes exact to
// thin_every steps).
struct StepRetention {
  int64_t keep_full = 10000;
  int64_t thin_every = 100;
};

enum class BatchResult { kStored, kDuplicate };

// A summary row as it stands after a commit.
struct StoredStep {
  std::string run_id;
  StepRow row;
};

class StepWriter {
 public:
  // Opens its own connection to the store's file (Store::Open made the
  // schema), with the store's journal and commit guard (common/sqlite.h).
  static absl::StatusOr<std::unique_ptr<StepWriter>> Open(
      const std::string& db_path, sqlite::Journal journal = sqlite::Journal::kWal,
      sqlite::Db::CommitGuard may_commit = nullptr);

  struct Outcome {
    std::vector<BatchResult> results;  // one per batch, in order
    std::vector<StoredStep> rows;      // each step row the commit changed
  };
  // One transaction for all `batches` (checked with CheckBatch before). On an
  // error nothing is stored and the batches may be sent again.
  absl::StatusOr<Outcome> Commit(const std::vector<const StepBatch*>& batches, WallTime now);

  // Deletes what the policy no longer keeps of the runs written since the
  // last prune; returns the rows deleted.
  absl::StatusOr<int64_t> Prune(const StepRetention& retention);

 private:
  StepWriter(std::unique_ptr<sqlite::Db> db, sqlite::Statement last_seq,
             sqlite::Statement put_seq, sqlite::Statement upsert)
      : db_(std::move(db)),
        last_seq_(std::move(last_seq)),
        put_seq_(std::move(put_seq)),
        upsert_(std::move(upsert)) {}
  absl::StatusOr<uint64_t> LastSeq(const BatchSource& source);

  std::unique_ptr<sqlite::Db> db_;
  sqlite::Statement last_seq_, put_seq_, upsert_;
  // The newest stored seq per source (a cache of step_batches: this is its
  // only writer). Cleared when it grows past kMaxCachedSources.
  std::map<BatchSource, uint64_t> seqs_;
  // Runs written since the last prune, with the newest step seen.
  std::map<std::string, int64_t> written_;
};

}  // namespace trellis::controller
