#pragma once
// Reconciliation with Slurm: at start-up and periodically, settle attempts
// whose job ended or vanished without the batch script reaching us. A part
// of the controller (docs/architecture.md, "The controller's parts").

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "controller/app/allocations.h"
#include "controller/app/effects.h"
#include "controller/app/loop_context.h"
#include "controller/core/decisions.h"
#include "controller/core/slurm_facts.h"

namespace trellis::controller {

class Reconciler {
 public:
  // Every squeue is shown to `allocations` too.
  Reconciler(LoopContext ctx, Allocations* allocations) : ctx_(ctx), allocations_(allocations) {}
  // Asks Slurm about every live attempt's job; `startup` only changes the log.
  Effects Tick(bool startup);

 private:
  using Shown = std::map<std::string, absl::StatusOr<std::optional<SlurmJob>>>;
  Effects OnSnapshot(const absl::StatusOr<std::vector<SlurmJob>>& listed, const Shown& shown,
                     bool startup);
  // Pending again after it started: the run waits as SUBMITTED.
  Effects Requeued(const RunRecord& run, const AttemptRecord& attempt, const SlurmJob& job);
  Effects SettleEnded(const RunRecord& run, const AttemptRecord& attempt,
                      const Reconciliation& r);
  std::optional<ExitFile> ReadExitFile(const RunRecord& run, int attempt) const;

  LoopContext ctx_;
  Allocations* allocations_;
  bool in_flight_ = false;
};

}  // namespace trellis::controller
