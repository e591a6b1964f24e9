#pragma once
// A worker's batch of step records on its way to the store, the bounds a
// batch must meet, and how a batch folds into the per-step summary rows
// (docs/architecture.md, "The step pipeline"). Pure.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/step_record.h"

namespace trellis::controller {

// At most this many records in one batch; the worker seals a batch before.
inline constexpr size_t kMaxBatchRecords = 4096;
// Rank numbers are below this (a world of a million ranks).
inline constexpr int kMaxRankNumber = 1 << 20;

// Where a batch comes from: one node's worker in one launch. Its sequence
// numbers count per source.
struct BatchSource {
  std::string run_id;
  int attempt = 0;
  int launch = 0;
  std::string node;
  bool operator<(const BatchSource& o) const {
    return std::tie(run_id, attempt, launch, node) < std::tie(o.run_id, o.attempt, o.launch, o.node);
  }
};

struct RankStepRecord {
  int rank = 0;
  StepRecord record;
};

struct StepBatch {
  BatchSource source;
  uint64_t seq = 0;
  std::vector<RankStepRecord> records;
};

// Why a batch is refused: a small enum, a metric label.
enum class BatchFault { kEmpty, kOversized, kBadSeq, kBadRank, kBadRecord };
const char* BatchFaultName(BatchFault f);

struct BatchRefusal {
  BatchFault fault;
  std::string error;  // names what is wrong and what is accepted
};

// nullopt: the batch may be stored. Checks every record, so a batch is
// stored whole or refused whole.
std::optional<BatchRefusal> CheckBatch(const StepBatch& batch);

// The summary row of one step of one launch.
struct StepKey {
  std::string run_id;
  int attempt = 0;
  int launch = 0;
  int64_t step = 0;
  bool operator<(const StepKey& o) const {
    return std::tie(run_id, attempt, launch, step) < std::tie(o.run_id, o.attempt, o.launch, o.step);
  }
};

// What records add to a step's summary row.
struct StepDelta {
  int ranks = 0;
  double loss_sum = 0;
  int64_t tokens = 0;
  double step_seconds_max = 0;
  StepRecord last;  // the last record folded (encoded only when stored)
};

// Adds the batch's records to `deltas` (records of one step, from any
// batches, become one delta).
void FoldBatch(const StepBatch& batch, std::map<StepKey, StepDelta>* deltas);

}  // namespace trellis::controller
