#include "controller/app/run_health.h"

#include "common/log.h"

namespace trellis::controller {

void RunHealth::KeepLatest(const WorkerId& id, int rank, const StepRecord& record) {
  using Result = RankLatestTable::Result;
  Result r = rank_latest_.Record(id.run_id, id.attempt, id.launch, rank, id.node, record,
                                 ctx_.clock.Now());
  if (r == Result::kNoSet) {
    // The launch's first record here (or the first since the controller
    // started): one read for the world size; an ended run starts no set.
    auto run = ctx_.store.GetRun(id.run_id);
    if (!run.ok() || IsTerminal(run->state)) return;
    if (rank_latest_.Begin(id.run_id, id.attempt, id.launch, run->nodes * run->ranks_per_node))
      r = rank_latest_.Record(id.run_id, id.attempt, id.launch, rank, id.node, record,
                              ctx_.clock.Now());
  }
  if (r == Result::kOutOfRange)
    spdlog::debug("run {}: step record of rank {} from {} is outside the world; not kept",
                  id.run_id, rank, id.node);
}

std::optional<StepRow> RunHealth::RecordStep(const WorkerId& id, int rank,
                                             const StepRecord& record) {
  KeepLatest(id, rank, record);
  auto row = ctx_.store.RecordStep(id.run_id, id.attempt, id.launch, record.step, record.loss,
                                   record.tokens, record.step_seconds, EncodeStepRecord(record),
                                   ctx_.clock.Now());
  if (!row.ok()) {
    spdlog::warn("run {}: step not stored: {}", id.run_id, std::string(row.status().message()));
    return std::nullopt;
  }
  return *row;
}

}  // namespace trellis::controller
