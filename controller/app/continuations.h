#pragma once
// Continuations submitted ahead (restart.continuation = "ahead";
// docs/architecture.md, "Continuations ahead"): after each squeue snapshot,
// every run whose attempt trains in a job with a time limit, and has no
// attempt waiting ahead yet, gets one, eligible a lead before that limit. A
// part of the controller: loop thread only, reads a StoreView, returns
// Effects (QueueAheadOf, carried out by Scheduler::QueueAhead).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
  Effects KeepOffStruckNodes(const std::string& run_id, const AttemptRecord& waiting,
                             const std::vector<SlurmJob>& listed);

  LoopContext ctx_;
  // job id -> the --exclude last sent to a pending waiting job (memory only:
  // after a restart, one update more).
  std::map<std::string, std::vector<std::string>> exclude_sent_;
  // Read once per snapshot, and only when a run needs a lead.
  std::optional<std::vector<AttemptQueueFacts>> history_;
};

// A health event of the run that no rank or node raised (kind, its detail for
// people and as JSON); `launch` 0 where it is about no launch.
HealthEventRecord RunEvent(std::string kind, const std::string& run_id, int attempt, int launch,
                           WallTime now, std::string detail,
                           const nlohmann::json& j = nlohmann::json::object());

// A health event of the continuations (kContinuationEvent): a waiting attempt
// queued, handed over, given up; `launch` 0 where it is about no launch.
HealthEventRecord ContinuationEvent(const std::string& run_id, int attempt, int launch,
                                    WallTime now, std::string detail,
                                    const nlohmann::json& j = nlohmann::json::object());

// The nodes an sbatch was kept off (--exclude=a,b), in order.
std::vector<std::string> ExcludedBy(const std::vector<std::string>& sbatch_args);

// How many of the newest runs the queue waits are read from.
inline constexpr int kQueueWaitRuns = 50;
// Waiting attempts given up (Slurm ended them, their gate failed) before no
// more are queued for the same current attempt.
inline constexpr int kMaxWaitingGivenUp = 3;

}  // namespace trellis::controller
