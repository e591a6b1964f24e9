#pragma once
// How the controller talks to Slurm. The CLI implementation runs the Slurm
// commands with argument vectors; FakeSlurmClient is for scheduler tests.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/core/slurm_facts.h"

namespace trellis::controller {

class SlurmClient {
 public:
  virtual ~SlurmClient() = default;
  // sbatch --parsable ARGS... SCRIPT; returns the job id.
  virtual absl::StatusOr<std::string> Submit(const std::vector<std::string>& args,
                                             const std::string& script_path) = 0;
  // The jobs of this account that Slurm still lists.
  virtual absl::StatusOr<std::vector<SlurmJob>> ListJobs() = 0;
  // The jobs of this account named `name`: those Slurm lists and, where there
  // is accounting, those that ended in the last week.
  virtual absl::StatusOr<std::vector<SlurmJob>> JobsNamed(const std::string& name) = 0;
  // One job's details; nullopt when Slurm no longer knows it.
  virtual absl::StatusOr<std::optional<SlurmJob>> ShowJob(const std::string& id) = 0;
  // From accounting; Unimplemented where the site has none.
  virtual absl::StatusOr<std::optional<SlurmJob>> AccountingJob(const std::string& id) = 0;
  virtual absl::Status Cancel(const std::string& id) = 0;
  // scancel --signal=SIG JOB.STEP: one srun step of a job (a launch), which
  // ends while the job goes on. `signal` is a name without SIG: "TERM", "KILL".
  virtual absl::Status SignalStep(const std::string& job_id, const std::string& step_id,
                                  const std::string& signal) = 0;
  // A pending job made eligible in `start_in` (scontrol update StartTime=now+N), kept
  // off `exclude` and no other node (ExcNodeList=, empty: none): a continuation
  // submitted ahead, needed sooner. A job that started meanwhile is left as it is.
  virtual absl::Status ReleaseWaitingJob(const std::string& id, std::chrono::seconds start_in,
                                         const std::vector<std::string>& exclude) = 0;
  // scontrol update state=drain (needs Slurm operator rights).
  virtual absl::Status Drain(const std::string& node, const std::string& reason) = 0;
  // Nodes of a partition ("" = the default partition).
  virtual absl::StatusOr<std::vector<SlurmNode>> ListNodes(const std::string& partition) = 0;
  // The cluster's partitions by name (sinfo -o %R).
  virtual absl::StatusOr<std::vector<std::string>> ListPartitions() = 0;
  // The controller's user's associations in Slurm's accounting (sacctmgr);
  // an error where the cluster keeps none (no slurmdbd).
  virtual absl::StatusOr<std::vector<SlurmAssociation>> ListAssociations() = 0;
};

}  // namespace trellis::controller
