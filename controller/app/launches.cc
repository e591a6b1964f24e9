#include "controller/app/launches.h"

#include <set>
#include <unordered_map>

#include "absl/strings/str_split.h"

#include "common/checkpoint_layout.h"
#include "common/auth.h"
#include "common/exit_codes.h"
#include "common/sha256.h"
#include "common/log.h"
#include "common/status.h"
#include "common/version.h"
#include "controller/app/gate_json.h"
#include "controller/app/launch_answers.h"
#include "controller/app/metrics.h"
#include "controller/app/spec_paths.h"
#include "controller/slurm/parsers.h"
#include "controller/slurm/slurm_client.h"

namespace trellis::controller {

namespace {
// The stored digest against the presented secret's, in constant time: the
// secret is the worker's only credential, and the store keeps no clear copy.
bool SecretMatches(const std::string& stored_sha256, const std::string& presented) {
  return auth::TokensEqual(Sha256Hex(presented), stored_sha256);
}

SlurmCall CancelJob(const std::string& job) {
  return [job](SlurmClient& slurm) -> std::function<Effects()> {
    absl::Status st = slurm.Cancel(job);
    return [st, job] {
      if (!st.ok()) spdlog::error("scancel {} failed: {}", job, std::string(st.message()));
      return Effects{};
    };
  };
}
}  // namespace

absl::StatusOr<AttemptRecord> Launches::CheckWorker(const WorkerId& id) {
  auto attempt = ctx_.store.Attempts(id.run_id);
  if (!attempt.ok()) return attempt.status();
  for (const auto& a : *attempt) {
    if (a.attempt != id.attempt) continue;
    if (!SecretMatches(a.secret_sha256, id.secret))
      return absl::PermissionDeniedError("wrong secret for run " + id.run_id + " attempt " +
                                         std::to_string(id.attempt));
    return a;
  }
  return absl::NotFoundError("run " + id.run_id + " has no attempt " + std::to_string(id.attempt));
}

absl::StatusOr<std::string> Launches::AuthenticatedJob(const WorkerId& id) {
  auto known = launches_.find(KeyOf(id));
  if (known != launches_.end() && !known->second.slurm_job_id.empty()) {
    if (!SecretMatches(known->second.secret_sha256, id.secret))
      return absl::PermissionDeniedError("wrong secret for run " + id.run_id + " attempt " +
                                         std::to_string(id.attempt));
    return known->second.slurm_job_id;
  }
  auto attempt = CheckWorker(id);
  if (!attempt.ok()) return attempt.status();
  return attempt->slurm_job_id;
}

const std::vector<std::string>* Launches::PlannedNodes(const LaunchKey& key) {
  if (auto planned = planned_.find(key); planned != planned_.end()) return &planned->second;
  const auto& [run_id, attempt, launch] = key;
  if (launch < 2) return nullptr;
  auto rows = ctx_.store.Launches(run_id);
  if (!rows.ok()) return nullptr;
  const LaunchRecord* before = nullptr;
  for (const LaunchRecord& row : *rows) {
    if (row.attempt != attempt) continue;
    if (row.launch == launch) return nullptr;  // gated already: the plan was used
    if (row.launch == launch - 1) before = &row;
  }
  if (before == nullptr || before->recovery != "relaunch" || before->next_nodes.empty())
    return nullptr;
  return &(planned_[key] = absl::StrSplit(before->next_nodes, ',', absl::SkipEmpty()));
}

Launches::LaunchState* Launches::Create(const WorkerId& id, const spec::RunSpec& spec) {
  LaunchKey key = KeyOf(id);
  LaunchState& l = launches_[key];
  l.run_id = id.run_id;
  l.attempt = id.attempt;
  l.launch = id.launch;
  l.expected_nodes = spec.total_nodes();
  // A relaunch runs on the nodes NextLaunch named: the gate waits for those.
  if (const std::vector<std::string>* planned = PlannedNodes(key)) {
    l.planned = *planned;
    l.expected_nodes = static_cast<int>(l.planned.size());
    planned_.erase(key);
  }
  l.needed_nodes = spec.slurm.nodes;
  l.ranks_per_node = spec.slurm.ranks_per_node;
  l.policy = GatePolicyFor(spec);
  // The gate waits at most timeout_s after the first node of the launch registers.
  l.gate_timer = ctx_.clock.ScheduleAfter(l.policy.timeout, [this, key] {
    defer_([this, key] {
      auto found = launches_.find(key);
      if (found == launches_.end() || found->second.outcome) return Effects{};
      found->second.gate_timer = 0;
      return EvaluateGate(&found->second, /*timed_out=*/true);
    });
  });
  return &l;
}

Effects Launches::Register(const WorkerId& id, const std::string& version,
                           const std::string& hostname, const NodeProbe& probe,
                           const SlurmStep& step, const std::string& metrics_addr,
                           Reply<GateAnswer> reply) {
  auto refuse = [&](absl::StatusOr<GateAnswer> answer) {
    return Effects::Reply([reply, answer] { reply(answer); });
  };
  if (version != kVersion) {
    return refuse(absl::FailedPreconditionError(
        "worker version " + version + " does not match controller version " +
        std::string(kVersion) + "; deploy the controller's trellis-worker on the nodes"));
  }
  Effects fx;
  LaunchState* l = nullptr;
  bool first = false;
  auto known = launches_.find(KeyOf(id));
  if (known != launches_.end()) {
    // The launch is being gated: the store was consulted for its first
    // node; the others are checked against what it cached.
    l = &known->second;
    if (!SecretMatches(l->secret_sha256, id.secret))
      return refuse(absl::PermissionDeniedError("wrong secret for run " + id.run_id +
                                                " attempt " + std::to_string(id.attempt)));
  } else {
    auto attempt = CheckWorker(id);
    if (!attempt.ok()) return refuse(attempt.status());
    auto run = ctx_.store.GetRun(id.run_id);
    if (!run.ok()) return refuse(run.status());
    if (IsTerminal(run->state) || !attempt->live())
      return refuse(GateAnswer::Abort("run is " + std::string(StateName(run->state)) +
                                      ", attempt ended"));
    // A launch whose gate decided before (in an earlier life of this
    // controller, or one that ended): the stored decision answers. A second
    // gate could start ranks that already run elsewhere.
    auto past = ctx_.store.Launches(id.run_id);
    if (!past.ok()) return refuse(past.status());
    for (const LaunchRecord& row : *past) {
      if (row.attempt != id.attempt || row.launch != id.launch) continue;
      GateAnswer answer = AnswerDecidedLaunch(row, id.node);
      spdlog::info("run {} launch {}.{}: node {} registered after the gate decided; answering "
                   "{}: {}", id.run_id, id.attempt, id.launch, id.node,
                   answer.kind == GateAnswer::kGo        ? "GO"
                   : answer.kind == GateAnswer::kStandby ? "STANDBY"
                                                         : "ABORT",
                   answer.reason);
      answer.data_roots = ctx_.config.data_roots;
      return refuse(answer);
    }
    auto spec = ctx_.ParseStoredSpec(*run);
    if (!spec.ok()) return refuse(spec.status());
    l = Create(id, *spec);
    l->secret_sha256 = attempt->secret_sha256;
    l->slurm_job_id = attempt->slurm_job_id;
    // The first launch of an attempt, or a relaunch inside it.
    first = run->state == RunState::kSubmitted || run->state == RunState::kRestarting;
  }
  if (l->step.step_id.empty() && !step.step_id.empty()) l->step = step;
  if (l->outcome) {
    // A registration after the decision: a worker whose answer was lost on
    // its way gets it again (an ABORT would end the launch its peers run).
    if (l->outcome->kind != GateOutcome::kGo)
      return refuse(GateAnswer::Abort("the gate of this launch already decided: " +
                                      l->outcome->reason));
    return refuse(AnswerForNode(l->go, l->go_nodes, id.node,
                                std::to_string(id.attempt) + "." + std::to_string(id.launch)));
  }
  // A repeated registration (a worker retrying) replaces the node's verdict.
  NodeVerdict verdict = JudgeNode(id.node, probe, l->policy);
  auto same = std::find_if(l->registered.begin(), l->registered.end(),
                           [&](const NodeVerdict& v) { return v.node == id.node; });
  if (same == l->registered.end())
    l->registered.push_back(verdict);
  else
    *same = verdict;
  l->probes[id.node] = probe;
  l->hostnames[id.node] = hostname.empty() ? id.node : hostname;
  if (metrics_addr.empty())
    l->metrics_addrs.erase(id.node);
  else
    l->metrics_addrs[id.node] = metrics_addr;
  if (!verdict.passed)
    spdlog::warn("run {}: node {} fails the gate: {}", id.run_id, id.node, verdict.reasons[0]);
  // A worker that retries (e.g. after a controller restart) replaces its old call.
  for (auto& w : l->waiting)
    if (w.node == id.node) {
      fx.replies.push_back([r = std::move(w.reply)] {
        r(absl::AbortedError("superseded by a newer registration"));
      });
    }
  l->waiting.erase(std::remove_if(l->waiting.begin(), l->waiting.end(),
                                  [&](const PendingRegistration& w) { return w.node == id.node; }),
                   l->waiting.end());
  l->waiting.push_back({id.node, std::move(reply)});
  size_t count = l->registered.size();
  std::string progress = "node " + id.node + " registered (" + std::to_string(count) + " of " +
                         std::to_string(l->expected_nodes) + ")";
  if (first) {
    fx.transitions.push_back({id.run_id, RunState::kGating, progress});
  } else if ((count & (count - 1)) == 0) {
    // Progress is shown at 2, 4, 8, ... registrations: thousands of nodes
    // must not cost thousands of synchronous writes.
    fx.writes.push_back({"progress of " + id.run_id, [run_id = id.run_id, progress](Store& s) {
                           return s.SetStateReason(run_id, progress);
                         }});
  }
  fx += EvaluateGate(l, false);
  return fx;
}

Effects Launches::EvaluateGate(LaunchState* l, bool timed_out) {
  Effects fx;
  if (static_cast<int>(l->registered.size()) < l->expected_nodes && !timed_out) return fx;
  auto attempt = ctx_.store.LatestAttempt(l->run_id);
  std::vector<std::string> allocated = l->planned;
  if (allocated.empty() && attempt.ok() && attempt->has_value()) {
    auto names = ExpandHostlist((*attempt)->nodelist);
    if (names.ok()) allocated = *names;
  }
  GateOutcome out = DecideGate(l->registered, allocated, l->expected_nodes, l->needed_nodes,
                               l->ranks_per_node, timed_out, l->policy.timeout);
  if (out.kind == GateOutcome::kWaiting) return fx;
  // The run's paths were checked at submit, but a link inside a root may
  // have been pointed elsewhere since (hours in the queue, or a restart):
  // checked again before any rank can open them. A refusal ends the run.
  std::string paths_refused;
  if (out.kind == GateOutcome::kGo) {
    if (absl::Status paths = PathsStillAllowed(l->run_id); !paths.ok()) {
      paths_refused = std::string(paths.message()) + " (checked again at launch)";
      out.kind = GateOutcome::kAbort;
      out.reason = paths_refused;
    }
  }
  l->outcome = out;
  if (l->gate_timer) ctx_.clock.Cancel(l->gate_timer);
  l->gate_timer = 0;
  fx.writes.push_back(GateRecord(*l, out));
  ctx_.metrics.GateDecided(l->run_id, out.kind == GateOutcome::kGo, l->probes);
  for (const auto& v : out.verdicts) {
    if (v.passed) continue;
    std::string reason;
    for (const auto& r : v.reasons) reason += (reason.empty() ? "" : "; ") + r;
    auto probe = l->probes.find(v.node);
    fx.strikes.push_back({v.node, reason,
                          probe == l->probes.end() ? "{}" : ProbeToJson(probe->second),
                          "gate (run " + l->run_id + ")", /*until_released=*/false});
  }
  std::string run_id = l->run_id;
  int attempt_no = l->attempt, launch_no = l->launch;
  if (out.kind == GateOutcome::kGo) {
    // The attempt's nodes, in rank order.
    std::vector<std::string> go(l->needed_nodes);
    for (const auto& a : out.assignments)
      if (a.go) go[a.node_index] = a.node;
    std::string nodes;
    for (const auto& n : go) nodes += (nodes.empty() ? "" : ",") + n;
    fx.transitions.push_back({run_id, RunState::kRunning, out.reason, "{}", [=](Store& s) {
                                RETURN_IF_ERROR(s.SetAttemptNodes(run_id, attempt_no, nodes));
                                return s.SetAttemptLaunches(run_id, attempt_no, launch_no);
                              }});
    l->go_nodes = go;
    l->go = GoAnswer(*l, out);
    fx += Started(l);
    fx += AnswerWaiting(l);
    return fx;
  }
  fx += AnswerWaiting(l);
  // Abort: end this Slurm job and queue a new attempt; the failing nodes are
  // quarantined now, so the next submission excludes them.
  if (attempt.ok() && attempt->has_value() && !(*attempt)->slurm_job_id.empty())
    fx.slurm.push_back(CancelJob((*attempt)->slurm_job_id));
  WallTime now = ctx_.clock.Now();
  if (!paths_refused.empty()) {  // no attempt would fare better
    fx.transitions.push_back({run_id, RunState::kFailed, paths_refused, "{}", [=](Store& s) {
                                return s.EndAttempt(run_id, attempt_no, kExitDoNotRetry,
                                                    paths_refused, now);
                              }});
    return fx;
  }
  std::string why = "gate aborted attempt " + std::to_string(attempt_no) + ": " + out.reason;
  fx.transitions.push_back({run_id, RunState::kQueued, why, "{}", [=](Store& s) {
                              return s.EndAttempt(run_id, attempt_no, kExitGateAbort, why, now);
                            }});
  return fx;
}

absl::Status Launches::PathsStillAllowed(const std::string& run_id) const {
  auto run = ctx_.store.GetRun(run_id);
  if (!run.ok()) return absl::OkStatus();  // the store's trouble is reported where it is read
  auto spec = ctx_.ParseStoredSpec(*run);
  if (!spec.ok()) return absl::OkStatus();  // the scheduler fails such a run
  return CheckSpecPaths(*spec, ctx_.config.data_roots, ctx_.config.output_root);
}

Effects Launches::Started(LaunchState* l) {
  Effects fx;
  l->started = ctx_.clock.Now();
  LaunchRecord row;
  row.run_id = l->run_id;
  row.attempt = l->attempt;
  row.launch = l->launch;
  for (const auto& n : l->go_nodes) row.nodes += (row.nodes.empty() ? "" : ",") + n;
  row.started = l->started;
  // Stored before any node hears GO (Effects: writes, then replies).
  GoRecord record{l->go, l->step, {}, l->metrics_addrs};
  std::set<std::string> allocation(l->planned.begin(), l->planned.end());
  for (const auto& v : l->registered) allocation.insert(v.node);  // as Settle counts it
  record.allocation.assign(allocation.begin(), allocation.end());
  row.go_json = GoRecordToJson(record);
  fx.writes.push_back({"launch record of " + l->run_id,
                       [row](Store& s) { return s.PutLaunch(row); }});
  fx.started_launches.push_back(Watched(*l));
  return fx;
}

LaunchStartedEffect Launches::Watched(const LaunchState& l) const {
  LaunchStartedEffect started;
  started.ref = {l.run_id, l.attempt, l.launch};
  for (const auto& node : l.go_nodes) {
    for (int r = 0; r < l.ranks_per_node; ++r) started.rank_nodes.push_back(node);
    auto addr = l.metrics_addrs.find(node);
    if (addr != l.metrics_addrs.end()) started.metrics_addresses[node] = addr->second;
  }
  auto run = ctx_.store.GetRun(l.run_id);
  auto spec = run.ok() ? ctx_.ParseStoredSpec(*run) : absl::StatusOr<spec::RunSpec>(run.status());
  if (spec.ok()) {
    started.model = spec->has_model;
    started.restart = spec->restart;
    started.health = spec->health;
  }
  started.resumed = l.resumed;
  for (const auto& [node, yes] : l.reported)
    if (yes) started.finished_nodes.insert(node);
  for (const auto& e : l.rank_exits) started.ended_ranks.insert(e.rank);
  if (l.resumed) {
    // Episodes that ended before the restart are not held: a new one is raised.
    auto held = ctx_.store.RanksWithEvents(l.run_id, l.attempt, l.launch, kStragglerEvent,
                                           kStragglerEndedEvent);
    if (held.ok())
      started.straggler_ranks = *held;
    else  // at worst, an episode across the restart is raised twice
      spdlog::warn("run {}: the launch's straggler events were not read: {}", l.run_id,
                   std::string(held.status().message()));
  }
  return started;
}

StoreEffect Launches::GateRecord(const LaunchState& l, const GateOutcome& out) const {
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
  return {"gate record of " + l.run_id,
          [run_id = l.run_id, row](Store& s) { return s.AddGateRecord(run_id, row); }};
}

GateAnswer Launches::GoAnswer(const LaunchState& l, const GateOutcome& out) const {
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
  return go;
}

Effects Launches::AnswerWaiting(LaunchState* l) {
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
    fx.replies.push_back([r = std::move(w.reply), ans] { r(ans); });
  }
  l->waiting.clear();
  return fx;
}

void Launches::AbortRun(const std::string& run_id, const std::string& reason) {
  for (auto& [key, l] : launches_) {
    if (l.run_id != run_id) continue;
    if (l.gate_timer) ctx_.clock.Cancel(l.gate_timer);
    if (l.kill_timer) ctx_.clock.Cancel(l.kill_timer);
    l.gate_timer = l.kill_timer = 0;
    for (auto& w : l.waiting) w.reply(GateAnswer::Abort(reason));
    l.waiting.clear();
    if (!l.outcome) {
      GateOutcome aborted;
      aborted.kind = GateOutcome::kAbort;
      aborted.reason = reason;
      l.outcome = aborted;
    }
  }
}

void Launches::Shutdown() {
  for (auto& [key, l] : launches_) {
    if (l.gate_timer) ctx_.clock.Cancel(l.gate_timer);
    if (l.kill_timer) ctx_.clock.Cancel(l.kill_timer);
    l.gate_timer = l.kill_timer = 0;
    for (auto& w : l.waiting)
      w.reply(absl::UnavailableError("the controller is shutting down; register again"));
    l.waiting.clear();
  }
}

int Launches::WorldSize(const WorkerId& id) const {
  auto it = launches_.find(KeyOf(id));
  return it == launches_.end() ? 0 : it->second.needed_nodes * it->second.ranks_per_node;
}

}  // namespace trellis::controller
