#pragma once
// Continuations submitted ahead (restart.continuation = "ahead";
// docs/architecture.md, "Continuations ahead"): after each squeue snapshot,
// every run whose attempt trains in a job with a time limit, and has no
// attempt waiting ahead yet, gets one, eligible a lead before that limit. A
// part of the controller: loop thread only, reads a StoreView, returns
// Effects (QueueAheadOf, carried out by Scheduler::QueueAhead).

#include <optional>
#include <string>
#include <vector>

#include "controller/app/effects.h"
#include "controller/app/loop_context.h"
#include "controller/core/continuation.h"

namespace trellis::controller {

class Continuations {
 public:
  explicit Continuations(LoopContext ctx) : ctx_(ctx) {}
  Effects OnSnapshot(const std::vector<SlurmJob>& listed);

 private:
  // The queue waits this controller saw on `partition`, from its newest runs.
  std::vector<std::chrono::seconds> QueueWaits(const std::string& partition);

  LoopContext ctx_;
  // Read once per snapshot, and only when a run needs a lead.
  std::optional<std::vector<AttemptQueueFacts>> history_;
};

// How many of the newest runs the queue waits are read from.
inline constexpr int kQueueWaitRuns = 50;
// Waiting attempts given up (Slurm ended them, their gate failed) before no
// more are queued for the same current attempt.
inline constexpr int kMaxWaitingGivenUp = 3;

}  // namespace trellis::controller
