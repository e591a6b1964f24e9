#pragma once
// An in-memory Slurm for tests of the scheduler and reconciliation logic.
// The controller calls it from its Slurm thread: every method locks, and
// tests read through the locking accessors (Submissions(), Cancelled()).

#include <map>
#include <mutex>
#include <optional>

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
    std::lock_guard<std::mutex> lock(mu);
    if (!submit_error.ok()) return submit_error;
    std::string id = std::to_string(next_id++);
    submissions.push_back({args, script_path});
    std::string nodelist = allocation;
    for (const auto& a : args) {
      if (a.rfind("--job-name=", 0) == 0) names[id] = a.substr(11);
      // node1..nodeN unless the test names the allocation.
      if (a.rfind("--nodes=", 0) == 0 && nodelist.empty())
        nodelist = a == "--nodes=1" ? "node1" : "node[1-" + a.substr(8) + "]";
    }
    // Started at once: the tests drive the workers. A test of Slurm's
    // requeue sets the job PENDING again.
    jobs[id] = {id, "RUNNING", "None", nodelist, std::nullopt, 0};
    for (const auto& a : args)  // --time=M: the limit, all of it left
      if (a.rfind("--time=", 0) == 0) {
        jobs[id].time_limit = std::chrono::minutes(std::stoi(a.substr(7)));
        jobs[id].time_left = jobs[id].time_limit;
      }
    return id;
  }
  absl::StatusOr<std::vector<SlurmJob>> ListJobs() override {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<SlurmJob> out;
    for (const auto& [id, j] : jobs)
      if (!forgotten.count(id) && !j.state.terminal()) out.push_back(j);
    return out;
  }
  absl::StatusOr<std::vector<SlurmJob>> JobsNamed(const std::string& name) override {
    std::lock_guard<std::mutex> lock(mu);
    if (!jobs_named_error.ok()) return jobs_named_error;
    std::vector<SlurmJob> out;
    for (const auto& [id, j] : jobs)
      if (!forgotten.count(id) && names.count(id) && names.at(id) == name) out.push_back(j);
    return out;
  }
  absl::StatusOr<std::optional<SlurmJob>> ShowJob(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu);
    ++show_job_calls;
    if (!show_job_error.ok()) return show_job_error;
    auto it = jobs.find(id);
    if (it == jobs.end() || forgotten.count(id)) return std::nullopt;
    return std::optional<SlurmJob>(it->second);
  }
  absl::StatusOr<std::optional<SlurmJob>> AccountingJob(const std::string&) override {
    return absl::UnimplementedError("no accounting in the fake");
  }
  absl::Status Cancel(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu);
    cancelled.push_back(id);
    if (jobs.count(id)) jobs[id].state = "CANCELLED";
    return absl::OkStatus();
  }
  absl::Status ReleaseWaitingJob(const std::string& id, std::chrono::seconds start_in,
                                 const std::vector<std::string>& exclude) override {
    std::lock_guard<std::mutex> lock(mu);
    std::string joined;
    for (const auto& n : exclude) joined += (joined.empty() ? "" : ",") + n;
    released.push_back(id + " in " + std::to_string(start_in.count()) + " s" +
                       (joined.empty() ? "" : " exclude " + joined));
    return absl::OkStatus();
  }
  std::vector<std::string> Released() {
    std::lock_guard<std::mutex> lock(mu);
    return released;
  }
  absl::Status SignalStep(const std::string& job, const std::string& step,
                          const std::string& signal) override {
    std::lock_guard<std::mutex> lock(mu);
    signalled.push_back(job + "." + step + " " + signal);
    return absl::OkStatus();
  }
  std::vector<std::string> Signalled() {
    std::lock_guard<std::mutex> lock(mu);
    return signalled;
  }
  absl::Status Drain(const std::string& node, const std::string& reason) override {
    std::lock_guard<std::mutex> lock(mu);
    drained.push_back(node + ": " + reason);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<SlurmNode>> ListNodes(const std::string&) override {
    std::lock_guard<std::mutex> lock(mu);
    return nodes;
  }
  // Empty: the partitions are not known (no check).
  absl::StatusOr<std::vector<std::string>> ListPartitions() override {
    std::lock_guard<std::mutex> lock(mu);
    return partitions;
  }
  // Unset: a cluster without accounting (sacctmgr fails).
  absl::StatusOr<std::vector<SlurmAssociation>> ListAssociations() override {
    std::lock_guard<std::mutex> lock(mu);
    if (!associations) return absl::UnavailableError("sacctmgr: no accounting storage");
    return *associations;
  }

  std::vector<Submission> Submissions() {
    std::lock_guard<std::mutex> lock(mu);
    return submissions;
  }
  std::vector<std::string> Drained() {
    std::lock_guard<std::mutex> lock(mu);
    return drained;
  }
  std::vector<std::string> Cancelled() {
    std::lock_guard<std::mutex> lock(mu);
    return cancelled;
  }

  std::mutex mu;
  std::vector<std::string> released;

  int next_id = 100;
  absl::Status submit_error;
  std::string allocation;  // every job's nodelist; "": node[1-N] of --nodes=N
  absl::Status show_job_error;
  int show_job_calls = 0;
  std::vector<Submission> submissions;
  std::map<std::string, SlurmJob> jobs;
  std::map<std::string, std::string> names;  // job id -> --job-name
  absl::Status jobs_named_error;
  std::map<std::string, bool> forgotten;  // as if past MinJobAge
  std::vector<std::string> cancelled;
  std::vector<std::string> drained;
  std::vector<std::string> signalled;  // "JOB.STEP SIGNAL"
  std::vector<SlurmNode> nodes;
  std::vector<std::string> partitions;
  std::optional<std::vector<SlurmAssociation>> associations;
};

}  // namespace trellis::controller
