#pragma once
// Reconciliation with Slurm: at start-up and periodically, settle attempts
// whose job ended or vanished without the batch script reaching us. A part
// of the controller (docs/architecture.md, "The controller's parts"): loop
// thread only, reads a StoreView, returns Effects.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "controller/app/effects.h"
#include "controller/app/loop_context.h"
#include "controller/core/decisions.h"
#include "controller/core/slurm_facts.h"

namespace trellis::controller {

class Reconciler {
 public:
  explicit Reconciler(LoopContext ctx) : ctx_(ctx) {}
  // Asks Slurm about every live attempt's job (QueryJobs, answered in
  // OnSnapshot); `startup` only changes the log.
  Effects Tick(bool startup);
  Effects OnSnapshot(const JobsSeen& seen);

 private:
  // The attempt waiting ahead, whose job ended before it was taken up: ended.
  Effects WaitingJobGone(const RunRecord& run, const JobsSeen& seen);
  // Pending again after it started: the run waits as SUBMITTED.
  Effects Requeued(const RunRecord& run, const AttemptRecord& attempt, const SlurmJob& job);
  // What the attempt's newest launch left to resume from (its GO's resume
  // step against the checkpoint directory now); nullopt when unknown.
  std::optional<Progress> ProgressOf(const RunRecord& run, const AttemptRecord& attempt);
  Effects SettleEnded(const RunRecord& run, const AttemptRecord& attempt,
                      const Reconciliation& r);
  std::optional<ExitFile> ReadExitFile(const RunRecord& run, int attempt) const;
  // A SUBMITTED run's job that Slurm keeps pending for a reason that does
  // not pass by itself: said as the run's wait reason, and after
  // config.unschedulable_after the job is cancelled and the run fails.
  Effects PendingForGood(const RunRecord& run, const AttemptRecord& attempt,
                         const SlurmJob& job);

  LoopContext ctx_;
  bool in_flight_ = false;
  struct Pending {
    std::string reason;
    WallTime since;
  };
  std::map<std::string, Pending> pending_;  // by job id, while its reason holds
};

}  // namespace trellis::controller
