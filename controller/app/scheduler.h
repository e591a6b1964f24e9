#pragma once
// The queue: submission of runs, eligibility, sbatch of attempts, what
// follows a failed attempt (backoff, restart budget) and cancellation. A part
// of the controller (docs/architecture.md, "The controller's parts"): loop
// thread only, reads a StoreView, returns Effects; the answers to the
// commands it returns come back to its On* methods.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "controller/app/effects.h"
#include "controller/app/init_from.h"
#include "controller/app/loop_context.h"
#include "controller/app/views.h"

namespace trellis::controller {

class Scheduler {
 public:
  explicit Scheduler(LoopContext ctx) : ctx_(ctx) {}

  // A valid spec becomes CreateRun (answered in OnRunCreated); a dry run is
  // answered with what would be submitted.
  Effects Submit(const std::string& spec_toml, bool dry_run, const std::string& user,
                 ReplyTo<SubmitResult> reply);
  Effects OnRunCreated(const RunCreated& created);
  // A live job is cancelled first (CancelRunJob, then OnRunJobCancelled).
  Effects Cancel(const std::string& run_id, const std::string& reason, ReplyTo<RunState> reply);
  Effects OnRunJobCancelled(const RunJobCancelled& cancelled);
  // Looks at the queued runs: asks Slurm which nodes are usable
  // (ListUsableNodes), then submits the runs that fit (OnEligibility).
  Effects Tick();
  Effects OnEligibility(const NodesListed& listed);
  // An attempt's files written: a new attempt is stored (CreateAttempt), a
  // resumed one submitted; a failure ends the run FAILED.
  Effects OnAttemptFilesWritten(const AttemptFilesWritten& written);
  // A new attempt stored: its job is submitted.
  Effects OnAttemptCreated(const AttemptCreated& created);
  Effects OnSubmitted(const JobSubmitted& out);
  // The store refused the SUBMITTED transition: the job is ended.
  Effects OnJobRecorded(const JobRecorded& recorded);
  // A failed attempt: requeue after the backoff while the budget lasts, else FAILED.
  Effects EndAttempt(const AttemptEnded& end);
  // Continuations (continuation.h): the run's next attempt is submitted to
  // wait ahead, eligible in `begin_in` (or one stored without its job id is
  // submitted again).
  Effects QueueAhead(const QueueAheadOf& ask);
  // A run reached a terminal state: the attempt waiting ahead, if any, is
  // ended and its job cancelled.
  Effects RunEnded(const std::string& run_id);
  // At start-up: a run left RESTARTING with its attempt ended (the controller
  // stopped between the attempt's end and the run's requeue, two
  // transactions) is requeued or failed as EndAttempt would have.
  Effects RepairAtStartup();

 private:
  // The submitted spec with a relative training.data and a run's
  // training.init_from as found (spec_paths.h, init_from.h), `spec` updated;
  // the text as it came when nothing needed finding. `source`: the run's
  // checkpoint step it starts from, when init_from names a run.
  absl::StatusOr<std::string> ResolveSpecPaths(const std::string& submitted_toml,
                                               spec::RunSpec* spec,
                                               std::optional<InitFromFound>* source);
  Effects SubmitAttempt(const RunRecord& run, const spec::RunSpec& spec,
                        const std::vector<std::string>& excluded);
  // Which attempt an sbatch is for: a new number, or one stored without a
  // job id (resumed); with begin_in, it waits ahead (continuation.h).
  struct AttemptPlan {
    int attempt = 0;
    std::optional<AttemptRecord> resumed;
    std::optional<std::chrono::seconds> begin_in;
  };
  Effects PrepareAttempt(const RunRecord& run, const spec::RunSpec& spec,
                         const std::vector<std::string>& excluded, const AttemptPlan& plan);
  // OnSubmitted for an attempt waiting ahead: recorded, the run's state kept.
  Effects OnWaitingSubmitted(const JobSubmitted& out);
  // What follows an attempt's end when one waits ahead with its job: it
  // becomes the current attempt (SUBMITTED), released early where needed.
  Effects TakeUpWaiting(const RunRecord& run, const AttemptEnded& end, const RecoveryDecision& d,
                        const AttemptRecord& waiting);
  // The run's pending sbatch, sent ("submitting attempt N").
  Effects SubmitPending(const std::string& run_id, int attempt);
  // The run's preparation failed: nothing pending, nothing in flight.
  void DropPending(const std::string& run_id);
  Effects FinishCancel(const std::string& run_id, const std::string& reason,
                       ReplyTo<RunState> reply);

  LoopContext ctx_;
  std::set<std::string> submitting_;  // runs with an sbatch in flight
  bool tick_in_flight_ = false;
  std::vector<RunRecord> queued_at_tick_;  // the queued runs the tick asked about
  // The cluster's partitions at the last eligibility check; empty: not known.
  std::vector<std::string> partitions_;
  // The user's accounting associations as last listed (at most every
  // kAssociationsEvery: sacctmgr asks slurmdbd); empty: none or no accounting.
  std::vector<SlurmAssociation> associations_;
  std::optional<WallTime> associations_asked_;
  // Run -> the attempt being prepared: its sbatch, sent once its files are
  // written (OnAttemptFilesWritten) and, for a new attempt, stored
  // (OnAttemptCreated); `record` is the new attempt's row until it is sent.
  struct PendingAttempt {
    SubmitJob submit;
    std::optional<AttemptRecord> record;
    bool waiting = false;
  };
  std::map<std::string, PendingAttempt> pending_;
  std::set<std::string> waiting_sbatch_;  // runs whose sbatch in flight waits ahead
  std::map<std::string, std::string> waiting_why_;  // run -> when its waiting attempt starts
};

}  // namespace trellis::controller
