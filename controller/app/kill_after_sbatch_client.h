#pragma once
// Test hook (tests/e2e/crash_after_sbatch.sh, --test-kill-after-sbatch): a
// SlurmClient that SIGKILLs the controller right after sbatch returns a new
// job's id, before the controller can store it. Everything else passes
// through to the real client. Used only when that flag is given.

#include <csignal>
#include <memory>
#include <utility>

#include "common/log.h"
#include "controller/slurm/slurm_client.h"

namespace trellis::controller {

class KillAfterSbatchClient : public SlurmClient {
 public:
  explicit KillAfterSbatchClient(std::shared_ptr<SlurmClient> inner) : inner_(std::move(inner)) {}

  absl::StatusOr<std::string> Submit(const std::vector<std::string>& args,
                                     const std::string& script_path) override {
    auto job = inner_->Submit(args, script_path);
    if (job.ok()) {
      spdlog::warn("--test-kill-after-sbatch: killed after sbatch returned job {}", *job);
      raise(SIGKILL);
    }
    return job;
  }
  absl::StatusOr<std::vector<SlurmJob>> ListJobs() override { return inner_->ListJobs(); }
  absl::StatusOr<std::vector<SlurmJob>> JobsNamed(const std::string& name) override {
    return inner_->JobsNamed(name);
  }
  absl::StatusOr<std::optional<SlurmJob>> ShowJob(const std::string& id) override {
    return inner_->ShowJob(id);
  }
  absl::StatusOr<std::optional<SlurmJob>> AccountingJob(const std::string& id) override {
    return inner_->AccountingJob(id);
  }
  absl::Status Cancel(const std::string& id) override { return inner_->Cancel(id); }
  absl::Status ReleaseWaitingJob(const std::string& id, std::chrono::seconds start_in,
                                 const std::vector<std::string>& exclude) override {
    return inner_->ReleaseWaitingJob(id, start_in, exclude);
  }
  absl::Status SignalStep(const std::string& job_id, const std::string& step_id,
                          const std::string& signal) override {
    return inner_->SignalStep(job_id, step_id, signal);
  }
  absl::Status Drain(const std::string& node, const std::string& reason) override {
    return inner_->Drain(node, reason);
  }
  absl::StatusOr<std::vector<SlurmNode>> ListNodes(const std::string& partition) override {
    return inner_->ListNodes(partition);
  }
  absl::StatusOr<std::vector<std::string>> ListPartitions() override {
    return inner_->ListPartitions();
  }
  absl::StatusOr<std::vector<SlurmAssociation>> ListAssociations() override {
    return inner_->ListAssociations();
  }

 private:
  std::shared_ptr<SlurmClient> inner_;
};

}  // namespace trellis::controller
