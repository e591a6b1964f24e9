#pragma once
// A SlurmClient that times each command it passes on
// (trellis_slurm_command_duration_seconds), on the Slurm thread.

#include <chrono>
#include <memory>

#include "controller/app/metrics.h"
#include "controller/slurm/slurm_client.h"

namespace trellis::controller {

class TimedSlurmClient : public SlurmClient {
 public:
  TimedSlurmClient(std::shared_ptr<SlurmClient> slurm, Metrics& metrics)
      : slurm_(std::move(slurm)), metrics_(metrics) {}

  absl::StatusOr<std::string> Submit(const std::vector<std::string>& args,
                                     const std::string& script_path) override {
    return Timed(SlurmCommand::kSbatch, [&] { return slurm_->Submit(args, script_path); });
  }
  absl::StatusOr<std::vector<SlurmJob>> ListJobs() override {
    return Timed(SlurmCommand::kSqueue, [&] { return slurm_->ListJobs(); });
  }
  absl::StatusOr<std::vector<SlurmJob>> JobsNamed(const std::string& name) override {
    return Timed(SlurmCommand::kSqueue, [&] { return slurm_->JobsNamed(name); });
  }
  absl::StatusOr<std::optional<SlurmJob>> ShowJob(const std::string& id) override {
    return Timed(SlurmCommand::kScontrol, [&] { return slurm_->ShowJob(id); });
  }
  absl::StatusOr<std::optional<SlurmJob>> AccountingJob(const std::string& id) override {
    auto start = std::chrono::steady_clock::now();
    auto job = slurm_->AccountingJob(id);
    // Unimplemented: the site has no accounting, and no sacct ran.
    if (!absl::IsUnimplemented(job.status()))
      metrics_.ObserveSlurm(SlurmCommand::kSacct, std::chrono::steady_clock::now() - start);
    return job;
  }
  absl::Status ReleaseWaitingJob(const std::string& id, std::chrono::seconds start_in,
                                 const std::vector<std::string>& exclude) override {
    return Timed(SlurmCommand::kScontrol, [&] { return slurm_->ReleaseWaitingJob(id, start_in, exclude); });
  }
  absl::Status Cancel(const std::string& id) override {
    return Timed(SlurmCommand::kScancel, [&] { return slurm_->Cancel(id); });
  }
  absl::Status SignalStep(const std::string& job_id, const std::string& step_id,
                          const std::string& signal) override {
    return Timed(SlurmCommand::kScancel,
                 [&] { return slurm_->SignalStep(job_id, step_id, signal); });
  }
  absl::Status Drain(const std::string& node, const std::string& reason) override {
    return Timed(SlurmCommand::kScontrol, [&] { return slurm_->Drain(node, reason); });
  }
  absl::StatusOr<std::vector<SlurmNode>> ListNodes(const std::string& partition) override {
    return Timed(SlurmCommand::kSinfo, [&] { return slurm_->ListNodes(partition); });
  }
  absl::StatusOr<std::vector<std::string>> ListPartitions() override {
    return Timed(SlurmCommand::kSinfo, [&] { return slurm_->ListPartitions(); });
  }
  absl::StatusOr<std::vector<SlurmAssociation>> ListAssociations() override {
    return Timed(SlurmCommand::kSacctmgr, [&] { return slurm_->ListAssociations(); });
  }

 private:
  // The latency of the command itself, on the real steady clock (not the
  // controller's Clock, whose fake never moves by itself in tests).
  template <typename F>
  auto Timed(SlurmCommand command, F&& run) -> decltype(run()) {
    auto start = std::chrono::steady_clock::now();
    auto result = run();
    metrics_.ObserveSlurm(command, std::chrono::steady_clock::now() - start);
    return result;
  }

  std::shared_ptr<SlurmClient> slurm_;
  Metrics& metrics_;
};

}  // namespace trellis::controller
