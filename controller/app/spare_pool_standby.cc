// The standby workers of spare pool jobs (docs/architecture.md, "Spare
// pool"): one per node of a pool job, registered and gated while the job
// stands, told to leave when a relaunch draws it or it ends.
#include "absl/strings/str_join.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/version.h"
#include "controller/app/gate_json.h"
#include "controller/app/spare_pools.h"
#include "controller/core/gate_policy.h"

namespace trellis::controller {

namespace {

std::string PoolName(const std::string& run_id, int pool) {
  return "run " + run_id + "'s spare pool job " + std::to_string(pool);
}

// Why a pool job's standby workers leave; empty while it stands by.
std::string LeaveReason(const PoolJobRecord& row) {
  if (!row.live())
    return "spare pool job " + std::to_string(row.pool) + " ended: " + row.end_reason;
  if (row.drawn())
    return "spare pool job " + std::to_string(row.pool) + " joins relaunch " +
           std::to_string(row.drawn_attempt) + "." + std::to_string(row.drawn_launch);
  return "";
}

}  // namespace

absl::StatusOr<std::string> SparePools::StandbyJob(const StandbyCall& call) const {
  if (call.version != kVersion)
    return absl::FailedPreconditionError(
        "worker version " + call.version + " does not match controller version " +
        std::string(kVersion) + "; deploy the controller's trellis-worker on the nodes");
  auto rows = ctx_.store.PoolJobs(call.run_id);
  if (!rows.ok()) return rows.status();
  for (const PoolJobRecord& p : *rows) {
    if (p.pool != call.pool) continue;
    if (p.secret_sha256.empty() || !auth::TokensEqual(Sha256Hex(call.secret), p.secret_sha256))
      return absl::PermissionDeniedError("wrong secret for " + PoolName(call.run_id, call.pool));
    if (p.job_id.empty())
      return absl::UnavailableError(PoolName(call.run_id, call.pool) +
                                    " has no Slurm job id yet (its sbatch has not answered)");
    if (call.slurm_job_id != p.job_id)
      return absl::PermissionDeniedError("node " + call.node + " calls from Slurm job " +
                                         call.slurm_job_id + ", not " +
                                         PoolName(call.run_id, call.pool) + " (Slurm job " +
                                         p.job_id + ")");
    return p.job_id;
  }
  return absl::NotFoundError(PoolName(call.run_id, call.pool) + " is not known");
}

Effects SparePools::StandBy(const StandbyCall& call, ReplyTo<StandbyAnswer> reply) {
  Effects fx;
  std::optional<PoolJobRecord> row;
  if (auto rows = ctx_.store.PoolJobs(call.run_id); rows.ok())
    for (const PoolJobRecord& p : *rows)
      if (p.pool == call.pool) row = p;
  if (!row) return Answer<StandbyAnswer>(reply, absl::NotFoundError(
                                                    PoolName(call.run_id, call.pool) + " is gone"));
  if (std::string leave = LeaveReason(*row); !leave.empty())
    return Answer(reply, StandbyAnswer{true, leave});
  const WallTime now = ctx_.clock.Now();
  auto key = std::make_tuple(call.run_id, call.pool, call.node);
  auto known = standbys_.find(key);
  if (known == standbys_.end()) {
    // Its first call (or the first since this controller started): gated as
    // it would be when it joins a relaunch, so that a short node is known
    // while it can still be replaced.
    auto run = ctx_.store.GetRun(call.run_id);
    auto spec = run.ok() ? ctx_.ParseStoredSpec(*run) : absl::StatusOr<spec::RunSpec>(run.status());
    if (!spec.ok()) return Answer<StandbyAnswer>(reply, spec.status());
    NodeVerdict v = JudgeNode(call.node, call.probe, GatePolicyFor(*spec));
    if (!v.passed) {
      const std::string why = absl::StrJoin(v.reasons, "; ");
      fx.Add(StrikeNode{call.node, why, ProbeToJson(call.probe),
                        "gate (" + PoolName(call.run_id, call.pool) + ")",
                        /*until_released=*/false});
      fx += End(*row, "node " + call.node + " failed the gate while standing by: " + why,
                /*cancel=*/true);
      fx.Add(Answer(reply, StandbyAnswer{true, "this node failed the gate: " + why}));
      return fx;
    }
    std::string verdict = "gate passed, worst socket " + FormatGiB(v.score) + " free";
    if (!v.short_of_ranks_memory.empty())
      verdict += " (short of the ranks' host memory: " +
                 absl::StrJoin(v.short_of_ranks_memory, "; ") + ")";
    const std::string detail = "node " + call.node + " of spare pool job " +
                               std::to_string(call.pool) + " stands by: " + verdict;
    spdlog::info("run {}: {}", call.run_id, detail);
    fx.Add(RecordHealthEvent{SparePoolEvent(*row, 0, 0, now, detail,
                                            {{"event", "standing_by"},
                                             {"node", call.node},
                                             {"probe", nlohmann::json::parse(
                                                           ProbeToJson(call.probe))}})});
    known = standbys_.emplace(key, Standby{std::nullopt, now, verdict}).first;
  }
  Standby& s = known->second;
  s.last_heard = now;
  // A call that overtook the one held (its client gave up on it).
  if (s.held) fx.Add(Answer(*s.held, StandbyAnswer{false, s.verdict}));
  s.held = reply;
  return fx;
}

Effects SparePools::PoolWritten(const PoolJobRecord& row) {
  const std::string leave = LeaveReason(row);
  if (leave.empty()) return {};
  Effects fx;
  for (auto it = standbys_.begin(); it != standbys_.end();) {
    const auto& [run_id, pool, node] = it->first;
    if (run_id != row.run_id || pool != row.pool) {
      ++it;
      continue;
    }
    if (it->second.held) fx.Add(Answer(*it->second.held, StandbyAnswer{true, leave}));
    it = standbys_.erase(it);
  }
  return fx;
}

Effects SparePools::StandbysTick(WallTime now) {
  Effects fx;
  std::set<std::pair<std::string, int>> silent;
  for (auto& [key, s] : standbys_) {
    if (s.held) {
      fx.Add(Answer(*s.held, StandbyAnswer{false, s.verdict}));
      s.held.reset();
    } else if (now - s.last_heard > kStandbySilence) {
      silent.insert({std::get<0>(key), std::get<1>(key)});
    }
  }
  for (const auto& [run_id, pool] : silent) {
    auto rows = ctx_.store.PoolJobs(run_id);
    if (!rows.ok()) continue;
    for (const PoolJobRecord& row : *rows) {
      if (row.pool != pool || !LeaveReason(row).empty()) continue;
      std::string nodes;
      for (const auto& [key, s] : standbys_)
        if (std::get<0>(key) == run_id && std::get<1>(key) == pool &&
            now - s.last_heard > kStandbySilence)
          nodes += (nodes.empty() ? "" : ", ") + std::get<2>(key);
      // Ended here; PoolWritten forgets its standbys once the row is stored.
      fx += End(row,
                "its standby worker on " + nodes + " has not called for " +
                    std::to_string(kStandbySilence.count()) + " s (node or worker lost)",
                /*cancel=*/true);
    }
  }
  return fx;
}

Effects SparePools::Shutdown() {
  Effects fx;
  for (auto& [key, s] : standbys_)
    if (s.held)
      fx.Add(Answer<StandbyAnswer>(
          *s.held, absl::UnavailableError("the controller is shutting down; call again")));
  standbys_.clear();
  return fx;
}

}  // namespace trellis::controller
