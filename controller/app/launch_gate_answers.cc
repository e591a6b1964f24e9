// What the gate records of its decision and tells the waiting nodes
// (LaunchGate, controller/app/launches.h).
#include <algorithm>
#include <unordered_map>

#include "common/checkpoint_layout.h"
#include "controller/app/gate_json.h"
#include "controller/app/launches.h"

namespace trellis::controller {

RecordGate LaunchGate::GateRecord(const LaunchState& l, const GateOutcome& out) const {
  std::vector<NodeGateView> nodes;
  for (const auto& v : out.verdicts) {
    NodeGateView n{v.node, v.passed ? "standby" : "fail", v.reasons, v.score, {}};
    n.reasons.insert(n.reasons.end(), v.short_of_ranks_memory.begin(),
                     v.short_of_ranks_memory.end());
    for (const auto& a : out.assignments)
      if (a.node == v.node && a.go) n.decision = "go";
    if (out.kind == GateOutcome::kAbort && v.passed) n.decision = "standby";
    auto probe = l.probes.find(v.node);
    if (probe != l.probes.end())
      n.probe = probe->second;
    else
      n.decision = "missing";
    nodes.push_back(std::move(n));
  }
  GateRecordRow row{l.attempt, l.launch, ctx_.clock.Now(),
                    out.kind == GateOutcome::kGo ? "GO" : "ABORT", out.reason,
                    PolicyToJson(l.policy), NodeGatesToJson(nodes)};
  return {l.run_id, row};
}

GateAnswer LaunchGate::GoAnswer(const LaunchState& l, const GateOutcome& out) const {
  GateAnswer go;
  go.kind = GateAnswer::kGo;
  go.reason = out.reason;
  for (const auto& a : out.assignments)
    if (a.go && a.node_index == 0) {
      auto host = l.hostnames.find(a.node);
      go.master_addr = host != l.hostnames.end() ? host->second : a.node;
    }
  go.ranks_per_node = l.ranks_per_node;
  go.world_size = l.needed_nodes * l.ranks_per_node;
  auto run = ctx_.store.GetRun(l.run_id);
  // Distinct per launch, so runs sharing a host do not collide; the run
  // directory (under this controller's output root) keeps two controllers'
  // runs of the same id apart too.
  const std::string launch_key = (run.ok() ? run->run_dir : l.run_id) + "/" +
                                 std::to_string(l.attempt) + "/" + std::to_string(l.launch);
  go.master_port =
      ctx_.config.master_port + static_cast<int>(std::hash<std::string>{}(launch_key) % 2000);
  go.checkpoint_dir = run.ok() ? run->run_dir + "/checkpoints" : "";
  // A relaunch or a new attempt continues from the last complete checkpoint.
  go.resume_step = go.checkpoint_dir.empty() ? -1 : NewestCompleteCheckpoint(go.checkpoint_dir);
  // Checked above on the stored spec; the ranks check the corpus again on
  // the file they open, so a link swapped after this answer leads nowhere.
  go.data_roots = ctx_.config.data_roots;
  const RunMtbf mtbf =
      RunMtbfFor(FailureHistorySeen(), l.needed_nodes, ctx_.config.node_mtbf_prior_hours);
  go.mtbf_s = mtbf.seconds;
  go.mtbf_basis = mtbf.basis;
  return go;
}

// The ended launches of this controller's newest runs (kFailureHistoryRuns),
// as the nodes' failure rate needs them.
FailureHistory LaunchGate::FailureHistorySeen() const {
  std::vector<LaunchSpan> spans;
  auto runs = ctx_.store.ListRuns(kFailureHistoryRuns, /*active_only=*/false);
  if (!runs.ok()) return {};
  for (const RunRecord& run : *runs) {
    auto launches = ctx_.store.Launches(run.run_id);
    if (!launches.ok()) continue;
    for (const LaunchRecord& l : *launches) {
      if (!l.ended || l.nodes.empty()) continue;
      LaunchSpan span;
      span.nodes = static_cast<int>(std::count(l.nodes.begin(), l.nodes.end(), ',')) + 1;
      span.hours = std::chrono::duration<double>(*l.ended - l.started).count() / 3600;
      span.ended_as = ParseFailureClass(l.failure_class);
      spans.push_back(span);
    }
  }
  return FailureHistoryOf(spans);
}

Effects LaunchGate::AnswerWaiting(LaunchState* l) {
  Effects fx;
  const GateOutcome& out = *l->outcome;
  // Indexed by node: thousands of nodes wait here at once.
  std::unordered_map<std::string, const NodeAssignment*> assignment;
  for (const auto& a : out.assignments) assignment[a.node] = &a;
  std::unordered_map<std::string, const NodeVerdict*> failed;
  for (const auto& v : out.verdicts)
    if (!v.passed) failed[v.node] = &v;
  GateAnswer common;
  if (out.kind == GateOutcome::kGo) {
    common = l->go;
    common.kind = GateAnswer::kStandby;  // GO below for the nodes that go
  } else {
    common.reason = out.reason;
    common.kind = out.kind == GateOutcome::kAbort ? GateAnswer::kAbort : GateAnswer::kStandby;
  }
  for (auto& w : l->waiting) {
    GateAnswer ans = common;
    if (out.kind == GateOutcome::kGo) {
      // Nodes that failed the gate stand by too: a non-zero worker exit
      // would end the whole srun step (--kill-on-bad-exit).
      auto a = assignment.find(w.node);
      if (a != assignment.end() && a->second->go) {
        ans.kind = GateAnswer::kGo;
        ans.node_index = a->second->node_index;
        ans.rank_offset = a->second->rank_offset;
      }
      auto f = failed.find(w.node);
      if (f != failed.end()) ans.reason = "failed the gate: " + f->second->reasons[0];
    }
    fx.Add(Answer<GateAnswer>(w.reply, ans));
  }
  l->waiting.clear();
  return fx;
}

}  // namespace trellis::controller
