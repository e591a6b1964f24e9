#pragma once

#include <chrono>

#include "controller/slurm/slurm_client.h"

namespace trellis::controller {

struct SlurmCliOptions {
  std::string bin_dir;  // "" = find the commands on PATH
  std::chrono::milliseconds timeout{30000};
  bool accounting = false;  // sacct usable (AccountingStorageType is not none)
};

class SlurmCliClient : public SlurmClient {
 public:
  explicit SlurmCliClient(SlurmCliOptions options) : options_(std::move(options)) {}

  // Asks `scontrol show config` whether accounting storage is configured.
  static bool DetectAccounting(const SlurmCliOptions& options);

  absl::StatusOr<std::string> Submit(const std::vector<std::string>& args,
                                     const std::string& script_path) override;
  absl::StatusOr<std::vector<SlurmJob>> ListJobs() override;
  absl::StatusOr<std::vector<SlurmJob>> JobsNamed(const std::string& name) override;
  absl::StatusOr<std::optional<SlurmJob>> ShowJob(const std::string& id) override;
  absl::StatusOr<std::optional<SlurmJob>> AccountingJob(const std::string& id) override;
  absl::Status Cancel(const std::string& id) override;
  absl::Status ReleaseWaitingJob(const std::string& id, std::chrono::seconds start_in,
                                 const std::vector<std::string>& exclude) override;
  absl::Status SignalStep(const std::string& job_id, const std::string& step_id,
                          const std::string& signal) override;
  absl::Status Drain(const std::string& node, const std::string& reason) override;
  absl::StatusOr<std::vector<SlurmNode>> ListNodes(const std::string& partition) override;
  absl::StatusOr<std::vector<std::string>> ListPartitions() override;
  absl::StatusOr<std::vector<SlurmAssociation>> ListAssociations() override;

 private:
  std::string Bin(const std::string& name) const;
  SlurmCliOptions options_;
};

}  // namespace trellis::controller
