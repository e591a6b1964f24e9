#pragma once
// The queue: submission of runs, eligibility, sbatch of attempts, what
// follows a failed attempt (backoff, restart budget) and cancellation. A part
// of the controller (docs/architecture.md, "The controller's parts"): loop
// thread only, returns Effects.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "controller/app/effects.h"
#include "controller/app/loop_context.h"
#include "controller/app/views.h"

namespace trellis::controller {

class Scheduler {
 public:
  explicit Scheduler(LoopContext ctx) : ctx_(ctx) {}

  Effects Submit(const std::string& spec_toml, bool dry_run, const std::string& user,
                 Reply<SubmitResult> reply);
  Effects Cancel(const std::string& run_id, const std::string& reason, Reply<RunState> reply);
  // Looks at the queued runs: asks Slurm which nodes are usable, then submits
  // the runs that fit.
  Effects Tick();
  // A failed attempt: requeue after the backoff while the budget lasts, else FAILED.
  Effects EndAttempt(const AttemptEndEffect& end);

 private:
  using Usable = std::map<std::string, absl::StatusOr<std::vector<std::string>>>;
  Effects OnEligibility(const std::vector<RunRecord>& queued, const Usable& usable);
  Effects SubmitAttempt(const RunRecord& run, const spec::RunSpec& spec,
                        const std::vector<std::string>& excluded);
  Effects OnSubmitted(const std::string& run_id, int attempt, const std::vector<std::string>& args,
                      const std::string& secret, const absl::StatusOr<std::string>& job_id);
  Effects FinishCancel(const std::string& run_id, const std::string& reason,
                       Reply<RunState> reply);

  LoopContext ctx_;
  std::set<std::string> submitting_;  // runs with an sbatch in flight
  bool tick_in_flight_ = false;
};

}  // namespace trellis::controller
