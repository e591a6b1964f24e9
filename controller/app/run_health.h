#pragma once
// Run health: what the ranks report while they run. Keeps every rank's latest
// step record in memory and folds records into the store's per-step summary.
// A part of the controller (docs/architecture.md, "The controller's parts").

#include <optional>
#include <string>

#include "common/step_record.h"
#include "controller/app/effects.h"
#include "controller/app/loop_context.h"
#include "controller/app/views.h"
#include "controller/core/rank_latest.h"

namespace trellis::controller {

class RunHealth {
 public:
  explicit RunHealth(LoopContext ctx) : ctx_(ctx) {}

  // Stores the record's summary row and returns it (nullopt: not stored, logged).
  std::optional<StepRow> RecordStep(const WorkerId& id, int rank, const StepRecord& record);
  void RunEnded(const std::string& run_id) { rank_latest_.MarkEnded(run_id); }
  std::optional<RankLatestPage> RanksPage(const std::string& run_id, int from, int limit) const {
    return rank_latest_.Page(run_id, from, limit);
  }

 private:
  void KeepLatest(const WorkerId& id, int rank, const StepRecord& record);

  LoopContext ctx_;
  // The latest step record of every rank, per run (memory only; see
  // docs/architecture.md, "Store").
  RankLatestTable rank_latest_;
};

}  // namespace trellis::controller
