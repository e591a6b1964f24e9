#include "controller/core/step_batch.h"

#include <algorithm>

namespace trellis::controller {

const char* BatchFaultName(BatchFault f) {
  switch (f) {
    case BatchFault::kEmpty: return "empty";
    case BatchFault::kOversized: return "oversized";
    case BatchFault::kBadSeq: return "bad_seq";
    case BatchFault::kBadRank: return "bad_rank";
    case BatchFault::kBadRecord: return "bad_record";
  }
  return "unknown";
}

std::optional<BatchRefusal> CheckBatch(const StepBatch& batch) {
  if (batch.seq == 0)
    return BatchRefusal{BatchFault::kBadSeq, "seq: must be >= 1 (1, 2, 3, ... per launch and node)"};
  if (batch.records.empty())
    return BatchRefusal{BatchFault::kEmpty, "steps: a batch holds 1.." +
                                                std::to_string(kMaxBatchRecords) + " records"};
  if (batch.records.size() > kMaxBatchRecords)
    return BatchRefusal{BatchFault::kOversized,
                        "steps: " + std::to_string(batch.records.size()) +
                            " records; a batch holds at most " + std::to_string(kMaxBatchRecords)};
  for (size_t i = 0; i < batch.records.size(); ++i) {
    const RankStepRecord& r = batch.records[i];
    const std::string where = "steps[" + std::to_string(i) + "].";
    if (r.rank < 0 || r.rank >= kMaxRankNumber)
      return BatchRefusal{BatchFault::kBadRank, where + "rank: " + std::to_string(r.rank) +
                                                    "; accepted 0.." +
                                                    std::to_string(kMaxRankNumber - 1)};
    std::string error;
    if (!CheckStepRecord(r.record, &error))
      return BatchRefusal{BatchFault::kBadRecord, where + "record." + error};
  }
  return std::nullopt;
}

void FoldBatch(const StepBatch& batch, std::map<StepKey, StepDelta>* deltas) {
  for (const RankStepRecord& r : batch.records) {
    StepDelta& d = (*deltas)[StepKey{batch.source.run_id, batch.source.attempt,
                                     batch.source.launch, r.record.step}];
    d.step_seconds_max = d.ranks == 0 ? r.record.step_seconds
                                      : std::max(d.step_seconds_max, r.record.step_seconds);
    ++d.ranks;
    d.loss_sum += r.record.loss;
    d.tokens += r.record.tokens;
    d.last = r.record;
  }
}

}  // namespace trellis::controller
