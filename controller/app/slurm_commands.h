#pragma once
// The Slurm calls a part returns among its Effects (effects.h), run one at a
// time on the Slurm thread (slurm_calls.h), and the answers that come back to
// the part that asked, on the loop.

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/app/replies.h"
#include "controller/core/run_state.h"
#include "controller/core/slurm_facts.h"

namespace trellis::controller {

// sinfo of the queued runs' partitions: answered as NodesListed to
// Scheduler::OnEligibility.
struct ListUsableNodes {
  std::set<std::string> partitions;
  bool associations = false;  // the user's accounting associations too (sacctmgr)
};
// The attempt's job by name if one exists (adopted; any other of that name
// cancelled), else a new sbatch: answered as JobSubmitted to
// Scheduler::OnSubmitted.
struct SubmitJob {
  std::string run_id;
  int attempt = 0;
  std::string job_name;
  std::vector<std::string> args;
  std::string script_path;  // "": --wrap among the args
  int pool = 0;  // > 0: the run's spare pool job of that number, answered to SparePools
  // Written (atomically, mode 0600) before sbatch: a pool job's secret file.
  // One that cannot be written fails the call, unsubmitted.
  struct File {
    std::string path;
    std::string content;
  };
  std::vector<File> files_first{};
  // Only the job found by name, never a new sbatch: answered NOT_FOUND when
  // none is (a pool job of a run that ended while its sbatch was unanswered).
  bool only_adopt = false;
  // Not empty: a certification check of this node, answered to NodeCertifier.
  std::string certify_node{};
};
// scancel; a failure is logged with `why`.
struct CancelJob {
  std::string job_id;
  std::string why;
};
// scancel of a cancelled run's job: answered as RunJobCancelled to
// Scheduler::OnRunJobCancelled.
struct CancelRunJob {
  std::string run_id;
  std::string job_id;
  std::string why;
  ReplyTo<RunState> reply;
};
// A run's waiting attempt taken up sooner than its --begin: eligible now,
// kept off `exclude`; a failure is logged (it starts at its --begin instead).
struct ReleaseJob {
  std::string run_id;
  std::string job_id;
  std::chrono::seconds start_in{0};  // StartTime=now+N
  std::vector<std::string> exclude;
};
// scancel --signal=SIGNAL JOB.STEP; a failure is logged.
struct SignalStep {
  std::string run_id;
  std::string job_id;
  std::string step_id;
  std::string signal;
};
// squeue, and the end state of each of `job_ids` it does not list: answered
// as JobsSeen to Allocations::Observe and Reconciler::OnSnapshot.
struct QueryJobs {
  std::vector<std::string> job_ids;
  bool startup = false;
};
// scontrol show job: answered as JobShown to Allocations::Answered.
struct ShowJob {
  std::string job_id;
};
struct DrainNode {
  std::string node;
  std::string reason;
};

// --- their answers ---

// Partition -> its usable nodes (sinfo), or why they are unknown.
using UsableNodes = std::map<std::string, absl::StatusOr<std::vector<std::string>>>;
struct NodesListed {
  UsableNodes usable;
  // Every partition of the cluster; empty when it could not be listed.
  std::vector<std::string> partitions{};
  // The user's associations when asked and the cluster keeps accounting.
  std::optional<std::vector<SlurmAssociation>> associations{};
};
struct JobSubmitted {
  std::string run_id;
  int attempt = 0;
  absl::StatusOr<std::string> job;
  std::string adopted;                 // the job id, when found by name
  std::vector<std::string> cancelled;  // duplicates of the name
  int pool = 0;                        // as asked
  std::string certify_node{};          // as asked
};
struct RunJobCancelled {
  CancelRunJob call;
  absl::Status status;
};
struct JobsSeen {
  absl::StatusOr<std::vector<SlurmJob>> listed;
  // Each asked-for job squeue did not list: its end state, where known.
  std::map<std::string, absl::StatusOr<std::optional<SlurmJob>>> shown;
  bool startup = false;
};
struct JobShown {
  std::string job_id;
  absl::StatusOr<std::optional<SlurmJob>> shown;
};

}  // namespace trellis::controller
