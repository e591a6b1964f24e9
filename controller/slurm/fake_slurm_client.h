#pragma once
// An in-memory Slurm for tests of the scheduler and reconciliation logic.

#include <map>

#include "controller/slurm/slurm_client.h"

namespace trellis::controller {

class FakeSlurmClient : public SlurmClient {
 public:
  struct Submission {
    std::vector<std::string> args;
    std::string script_path;
  };

  absl::StatusOr<std::string> Submit(const std::vector<std::string>& args,
                                     const std::string& script_path) override {
    if (!submit_error.ok()) return submit_error;
    std::string id = std::to_string(next_id++);
    submissions.push_back({args, script_path});
    jobs[id] = {id, "PENDING", "None", "", std::nullopt};
    return id;
  }
  absl::StatusOr<std::vector<SlurmJob>> ListJobs() override {
    std::vector<SlurmJob> out;
    for (const auto& [id, j] : jobs)
      if (!forgotten.count(id) && !IsTerminalJobState(j.state)) out.push_back(j);
    return out;
  }
  absl::StatusOr<std::optional<SlurmJob>> ShowJob(const std::string& id) override {
    auto it = jobs.find(id);
    if (it == jobs.end() || forgotten.count(id)) return std::nullopt;
    return std::optional<SlurmJob>(it->second);
  }
  absl::StatusOr<std::optional<SlurmJob>> AccountingJob(const std::string&) override {
    return absl::UnimplementedError("no accounting in the fake");
  }
  absl::Status Cancel(const std::string& id) override {
    cancelled.push_back(id);
    if (jobs.count(id)) jobs[id].state = "CANCELLED";
    return absl::OkStatus();
  }
  absl::Status Drain(const std::string& node, const std::string& reason) override {
    drained.push_back(node + ": " + reason);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<SlurmNode>> ListNodes(const std::string&) override { return nodes; }

  int next_id = 100;
  absl::Status submit_error;
  std::vector<Submission> submissions;
  std::map<std::string, SlurmJob> jobs;
  std::map<std::string, bool> forgotten;  // as if past MinJobAge
  std::vector<std::string> cancelled;
  std::vector<std::string> drained;
  std::vector<SlurmNode> nodes;
};

}  // namespace trellis::controller
