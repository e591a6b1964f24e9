#include "controller/app/launch_registry.h"

#include <algorithm>

#include "absl/strings/str_split.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/sha256.h"

namespace trellis::controller {

void LaunchState::Gather(const std::string& node, const WorkerReport& report) {
  reported[node] = true;
  if (report.oom_kills >= 0) oom_kills[node] = report.oom_kills;
  time_limit_warned = time_limit_warned || report.time_limit_warned;
  for (const auto& e : report.ranks) {
    // The final report replaces what the stream said, keeping arrival order.
    auto known = std::find_if(rank_exits.begin(), rank_exits.end(),
                              [&](const RankExitInfo& k) { return k.rank == e.rank; });
    if (known != rank_exits.end())
      *known = e;
    else
      rank_exits.push_back(e);
  }
}

LaunchState* LaunchRegistry::Find(const LaunchRef& ref) {
  auto it = launches_.find(KeyOf(ref));
  return it == launches_.end() ? nullptr : &it->second;
}

const LaunchState* LaunchRegistry::Find(const LaunchRef& ref) const {
  auto it = launches_.find(KeyOf(ref));
  return it == launches_.end() ? nullptr : &it->second;
}

LaunchState& LaunchRegistry::Add(const LaunchRef& ref) {
  LaunchState& l = launches_[KeyOf(ref)];
  l.run_id = ref.run_id;
  l.attempt = ref.attempt;
  l.launch = ref.launch;
  return l;
}

void LaunchRegistry::Forget(const LaunchRef& ref, Effects& fx) {
  auto it = launches_.find(KeyOf(ref));
  if (it == launches_.end()) return;
  StopTimers(it->second, fx);
  launches_.erase(it);
}

std::vector<LaunchState*> LaunchRegistry::OfRun(const std::string& run_id,
                                                std::optional<int> attempt) {
  std::vector<LaunchState*> out;
  for (auto& [key, l] : launches_)
    if (l.run_id == run_id && (!attempt || l.attempt == *attempt)) out.push_back(&l);
  return out;
}

std::vector<LaunchState*> LaunchRegistry::All() {
  std::vector<LaunchState*> out;
  for (auto& [key, l] : launches_) out.push_back(&l);
  return out;
}

const std::vector<std::string>* LaunchRegistry::PlannedNodes(const LaunchRef& ref,
                                                             StoreView& store) {
  if (auto planned = planned_.find(KeyOf(ref)); planned != planned_.end())
    return &planned->second;
  if (ref.launch < 2) return nullptr;
  auto rows = store.Launches(ref.run_id);
  if (!rows.ok()) return nullptr;
  const LaunchRecord* before = nullptr;
  for (const LaunchRecord& row : *rows) {
    if (row.attempt != ref.attempt) continue;
    if (row.launch == ref.launch) return nullptr;  // gated already: the plan was used
    if (row.launch == ref.launch - 1) before = &row;
  }
  if (before == nullptr || before->recovery != "relaunch" || before->next_nodes.empty())
    return nullptr;
  return &(planned_[KeyOf(ref)] = absl::StrSplit(before->next_nodes, ',', absl::SkipEmpty()));
}

void LaunchRegistry::Plan(const LaunchRef& ref, std::vector<std::string> nodes) {
  planned_[KeyOf(ref)] = std::move(nodes);
}

void LaunchRegistry::DropPlan(const LaunchRef& ref) { planned_.erase(KeyOf(ref)); }

int LaunchRegistry::DropPlansOf(const std::string& run_id, int attempt) {
  int last = 0;
  for (auto it = planned_.begin(); it != planned_.end();) {
    const auto& [plan_run, plan_attempt, launch] = it->first;
    if (plan_run == run_id && plan_attempt == attempt) {
      last = std::max(last, launch);
      it = planned_.erase(it);
    } else {
      ++it;
    }
  }
  return last;
}

void StopTimers(LaunchState& l, Effects& fx) {
  if (l.gate_timer) fx.Add(CancelTimer{{TimerKey::kGateTimeout, l.Ref()}});
  if (l.stop_timer) fx.Add(CancelTimer{{TimerKey::kStopGrace, l.Ref()}});
  l.gate_timer = l.stop_timer = false;
}

absl::StatusOr<AttemptRecord> CheckWorker(StoreView& store, const WorkerId& id) {
  auto attempts = store.Attempts(id.run_id);
  if (!attempts.ok()) return attempts.status();
  for (const auto& a : *attempts) {
    if (a.attempt != id.attempt) continue;
    // The stored digest against the presented secret's, in constant time:
    // the secret is the worker's only credential, and the store keeps no
    // clear copy.
    if (!auth::TokensEqual(Sha256Hex(id.secret), a.secret_sha256))
      return absl::PermissionDeniedError("wrong secret for run " + id.run_id + " attempt " +
                                         std::to_string(id.attempt));
    return a;
  }
  return absl::NotFoundError("run " + id.run_id + " has no attempt " + std::to_string(id.attempt));
}

WatchLaunch WatchOf(const LaunchState& l, const LoopContext& ctx) {
  WatchLaunch started;
  started.ref = l.Ref();
  for (const auto& node : l.go_nodes) {
    for (int r = 0; r < l.ranks_per_node; ++r) started.rank_nodes.push_back(node);
    auto addr = l.metrics_addrs.find(node);
    if (addr != l.metrics_addrs.end()) started.metrics_addresses[node] = addr->second;
  }
  auto run = ctx.store.GetRun(l.run_id);
  auto spec = run.ok() ? ctx.ParseStoredSpec(*run) : absl::StatusOr<spec::RunSpec>(run.status());
  if (spec.ok()) {
    started.model = spec->has_model;
    started.restart = spec->restart;
    started.health = spec->health;
  }
  started.resumed = l.resumed;
  started.mtbf_s = l.go.mtbf_s;
  started.mtbf_basis = l.go.mtbf_basis;
  for (const auto& [node, yes] : l.reported)
    if (yes) started.finished_nodes.insert(node);
  for (const auto& e : l.rank_exits) started.ended_ranks.insert(e.rank);
  if (l.resumed) {
    // Episodes that ended before the restart are not held: a new one is raised.
    auto held = ctx.store.RanksWithEvents(l.run_id, l.attempt, l.launch, kStragglerEvent,
                                          kStragglerEndedEvent);
    if (held.ok())
      started.straggler_ranks = *held;
    else  // at worst, an episode across the restart is raised twice
      spdlog::warn("run {}: the launch's straggler events were not read: {}", l.run_id,
                   std::string(held.status().message()));
  }
  return started;
}

}  // namespace trellis::controller
