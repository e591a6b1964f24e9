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
  // At start-up: a run left RESTARTING with its attempt ended (the controller
  // stopped between the attempt's end and the run's requeue, two
  // transactions) is requeued or failed as EndAttempt would have.
  Effects RepairAtStartup();

 private:
  using Usable = std::map<std::string, absl::StatusOr<std::vector<std::string>>>;
  Effects OnEligibility(const std::vector<RunRecord>& queued, const Usable& usable);
  Effects SubmitAttempt(const RunRecord& run, const spec::RunSpec& spec,
                        const std::vector<std::string>& excluded);
  // On the Slurm thread: the attempt's job by name if one exists (adopted;
  // any other of that name cancelled), else a new sbatch.
  struct SubmitOutcome {
    absl::StatusOr<std::string> job;
    std::string adopted;                 // the job id, when found by name
    std::vector<std::string> cancelled;  // duplicates of the name
  };
  static SubmitOutcome SubmitOnce(SlurmClient& slurm, const std::string& name,
                                  const std::vector<std::string>& args,
                                  const std::string& script_path);
  Effects OnSubmitted(const std::string& run_id, int attempt, const SubmitOutcome& out);
  Effects FinishCancel(const std::string& run_id, const std::string& reason,
                       Reply<RunState> reply);

  LoopContext ctx_;
  std::set<std::string> submitting_;  // runs with an sbatch in flight
  bool tick_in_flight_ = false;
};

}  // namespace trellis::controller
