#pragma once
// A StoreView over records a test sets (the parts' tests): runs, attempts,
// launches, final reports and quarantine entries, read as the store would
// give them.

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "controller/app/store_view.h"

namespace trellis::controller {

class FakeStoreView : public StoreView {
 public:
  std::map<std::string, RunRecord> runs;  // by run id
  std::map<std::string, std::vector<AttemptRecord>> attempts;  // oldest first
  std::map<std::string, std::vector<LaunchRecord>> launches;
  std::map<std::tuple<std::string, int, int>, std::vector<WorkerReportRecord>> reports;
  std::map<std::tuple<std::string, int, int>, std::set<int>> straggling;  // unended episodes
  std::vector<QuarantineEntry> quarantine;
  std::map<std::string, std::vector<HealthEventRecord>> events;  // oldest first
  std::vector<PoolJobRecord> pools;

  RunRecord& AddRun(const std::string& name, int64_t seq, const std::string& spec_toml,
                    RunState state, const std::string& run_dir) {
    RunRecord r;
    r.seq = seq;
    r.run_id = name + "-" + std::to_string(seq);
    r.name = name;
    r.user = "tester";
    r.spec_toml = spec_toml;
    r.run_dir = run_dir;
    r.state = state;
    return runs[r.run_id] = r;
  }
  AttemptRecord& AddAttempt(const std::string& run_id, int attempt, const std::string& job_id) {
    AttemptRecord a;
    a.run_id = run_id;
    a.attempt = attempt;
    a.slurm_job_id = job_id;
    attempts[run_id].push_back(a);
    return attempts[run_id].back();
  }

  absl::StatusOr<RunRecord> GetRun(const std::string& run_id) override {
    auto it = runs.find(run_id);
    if (it == runs.end()) return absl::NotFoundError("run " + run_id + " not found");
    return it->second;
  }
  absl::StatusOr<std::vector<RunRecord>> ListRuns(int limit, bool active_only) override {
    std::vector<RunRecord> out;
    for (const auto& [id, r] : runs)
      if (!active_only || !IsTerminal(r.state)) out.push_back(r);
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.seq > b.seq; });
    if (static_cast<int>(out.size()) > limit) out.resize(limit);
    return out;
  }
  absl::StatusOr<std::vector<AttemptRecord>> Attempts(const std::string& run_id) override {
    return attempts[run_id];
  }
  absl::StatusOr<std::optional<AttemptRecord>> LatestAttempt(const std::string& run_id) override {
    const auto& a = attempts[run_id];
    for (auto it = a.rbegin(); it != a.rend(); ++it)
      if (!it->waiting) return std::optional<AttemptRecord>(*it);
    return std::optional<AttemptRecord>();
  }
  absl::StatusOr<std::vector<LaunchRecord>> Launches(const std::string& run_id) override {
    return launches[run_id];
  }
  absl::StatusOr<std::vector<LaunchRecord>> LaunchesEndedSince(
      WallTime since, const std::string& failure_class) override {
    std::vector<LaunchRecord> out;
    for (const auto& [run, rows] : launches)
      for (const auto& l : rows)
        if (l.failure_class == failure_class && l.ended && *l.ended >= since) out.push_back(l);
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return *a.ended < *b.ended; });
    return out;
  }
  absl::StatusOr<std::vector<WorkerReportRecord>> WorkerReports(const std::string& run_id,
                                                                int attempt,
                                                                int launch) override {
    return reports[{run_id, attempt, launch}];
  }
  absl::StatusOr<std::set<int>> RanksWithEvents(const std::string& run_id, int attempt,
                                                int launch, const std::string&,
                                                const std::string&) override {
    return straggling[{run_id, attempt, launch}];
  }
  absl::StatusOr<std::vector<QuarantineEntry>> QuarantineEntries() override { return quarantine; }
  absl::StatusOr<std::vector<HealthEventRecord>> HealthEventsOf(const std::string& run_id,
                                                                const std::string& kind) override {
    std::vector<HealthEventRecord> out;
    for (const auto& e : events[run_id])
      if (e.kind == kind) out.push_back(e);
    return out;
  }
  absl::StatusOr<std::vector<PoolJobRecord>> PoolJobs(const std::string& run_id) override {
    std::vector<PoolJobRecord> out;
    for (const auto& p : pools)
      if (run_id.empty() ? p.live() : p.run_id == run_id) out.push_back(p);
    return out;
  }
};

}  // namespace trellis::controller
