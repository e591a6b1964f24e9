// Workers: registration and the launch gate, step records, exits, relaunch.
#include <unordered_map>

#include "common/checkpoint_layout.h"
#include "common/log.h"
#include "common/status.h"
#include "common/version.h"
#include "controller/app/controller.h"
#include "controller/slurm/parsers.h"

namespace trellis::controller {

namespace asio = boost::asio;

namespace {
// Constant-time compare: the secret is the worker's only credential.
bool SecretsEqual(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}
}  // namespace

absl::StatusOr<AttemptRecord> Controller::CheckWorker(const WorkerId& id) {
  auto attempt = store_->Attempts(id.run_id);
  if (!attempt.ok()) return attempt.status();
  for (const auto& a : *attempt) {
    if (a.attempt != id.attempt) continue;
    if (!SecretsEqual(a.secret, id.secret))
      return absl::PermissionDeniedError("wrong secret for run " + id.run_id + " attempt " +
                                         std::to_string(id.attempt));
    return a;
  }
  return absl::NotFoundError("run " + id.run_id + " has no attempt " + std::to_string(id.attempt));
}

void Controller::AuthenticateWorker(WorkerId id, Reply<bool> reply) {
  asio::post(io_, [this, id = std::move(id), reply = std::move(reply)] {
    auto a = CheckWorker(id);
    if (!a.ok()) return reply(a.status());
    reply(true);
  });
}

Controller::LaunchState* Controller::FindOrCreateLaunch(const WorkerId& id, const RunRecord& run,
                                                        const spec::RunSpec& spec) {
  LaunchKey key{id.run_id, id.attempt, id.launch};
  auto it = launches_.find(key);
  if (it != launches_.end()) return &it->second;
  LaunchState& l = launches_[key];
  l.run_id = id.run_id;
  l.attempt = id.attempt;
  l.launch = id.launch;
  l.expected_nodes = spec.total_nodes();
  l.needed_nodes = spec.slurm.nodes;
  l.ranks_per_node = spec.slurm.ranks_per_node;
  l.policy = GatePolicy{spec.gate.min_free_gib_per_socket, spec.gate.max_unattributed_gib_per_socket,
                        std::chrono::seconds(spec.gate.timeout_s), spec.gate.touch_probe};
  // The gate waits at most timeout_s after the first node of the launch registers.
  l.gate_timer = std::make_unique<asio::steady_timer>(io_);
  l.gate_timer->expires_after(std::chrono::seconds(spec.gate.timeout_s));
  l.gate_timer->async_wait([this, key](const boost::system::error_code& ec) {
    if (ec) return;
    auto found = launches_.find(key);
    if (found != launches_.end() && !found->second.outcome) EvaluateGate(&found->second, true);
  });
  (void)run;
  return &l;
}

void Controller::Register(WorkerId id, std::string version, std::string hostname,
                          NodeProbeFigures probe, Reply<GateAnswer> reply) {
  asio::post(io_, [this, id = std::move(id), version = std::move(version),
                   hostname = std::move(hostname), probe = std::move(probe),
                   reply = std::move(reply)]() mutable {
    if (version != kVersion) {
      return reply(absl::FailedPreconditionError(
          "worker version " + version + " does not match controller version " +
          std::string(kVersion) + "; deploy the controller's trellis-worker on the nodes"));
    }
    LaunchState* l = nullptr;
    bool first = false;
    auto known = launches_.find({id.run_id, id.attempt, id.launch});
    if (known != launches_.end()) {
      // The launch is being gated: the store was consulted for its first
      // node; the others are checked against what it cached.
      l = &known->second;
      if (!SecretsEqual(l->secret, id.secret))
        return reply(absl::PermissionDeniedError("wrong secret for run " + id.run_id +
                                                 " attempt " + std::to_string(id.attempt)));
    } else {
      auto attempt = CheckWorker(id);
      if (!attempt.ok()) return reply(attempt.status());
      auto run = store_->GetRun(id.run_id);
      if (!run.ok()) return reply(run.status());
      if (IsTerminal(run->state) || !attempt->live()) {
        return reply(GateAnswer::Abort("run is " + std::string(StateName(run->state)) +
                                       ", attempt ended"));
      }
      auto spec = ParseStoredSpec(*run);
      if (!spec.ok()) return reply(spec.status());
      l = FindOrCreateLaunch(id, *run, *spec);
      l->secret = attempt->secret;
      first = run->state == RunState::kSubmitted;
    }
    if (l->outcome) {
      // A late or repeated registration after the decision.
      return reply(GateAnswer::Abort("the gate of this launch already decided"));
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
    if (!verdict.passed)
      spdlog::warn("run {}: node {} fails the gate: {}", id.run_id, id.node, verdict.reasons[0]);
    // A worker that retries (e.g. after a controller restart) replaces its old call.
    for (auto& w : l->waiting)
      if (w.node == id.node) w.reply(absl::AbortedError("superseded by a newer registration"));
    l->waiting.erase(std::remove_if(l->waiting.begin(), l->waiting.end(),
                                    [&](const PendingRegistration& w) { return w.node == id.node; }),
                     l->waiting.end());
    l->waiting.push_back({id.node, std::move(reply)});
    size_t count = l->registered.size();
    std::string progress = "node " + id.node + " registered (" + std::to_string(count) + " of " +
                           std::to_string(l->expected_nodes) + ")";
    if (first) {
      (void)Transition(id.run_id, RunState::kGating, progress);
    } else if ((count & (count - 1)) == 0) {
      // Progress is shown at 2, 4, 8, ... registrations: thousands of nodes
      // must not cost thousands of synchronous writes.
      (void)store_->SetStateReason(id.run_id, progress);
    }
    EvaluateGate(l, false);
  });
}

void Controller::EvaluateGate(LaunchState* l, bool timed_out) {
  if (static_cast<int>(l->registered.size()) < l->expected_nodes && !timed_out) return;
  auto attempt = store_->LatestAttempt(l->run_id);
  std::vector<std::string> allocated;
  if (attempt.ok() && attempt->has_value()) {
    auto names = ExpandHostlist((*attempt)->nodelist);
    if (names.ok()) allocated = *names;
  }
  GateOutcome out = DecideGate(l->registered, allocated, l->expected_nodes, l->needed_nodes,
                               l->ranks_per_node, timed_out, l->policy.timeout);
  if (out.kind == GateOutcome::kWaiting) return;
  l->outcome = out;
  l->gate_timer->cancel();
  RecordGate(l, out);
  for (const auto& v : out.verdicts) {
    if (v.passed) continue;
    std::string reason;
    for (const auto& r : v.reasons) reason += (reason.empty() ? "" : "; ") + r;
    auto probe = l->probes.find(v.node);
    StrikeNode(v.node, reason,
               probe == l->probes.end() ? "{}" : ProbeToJson(probe->second),
               "gate (run " + l->run_id + ")", /*until_released=*/false);
  }
  if (out.kind == GateOutcome::kGo) {
    // The attempt's nodes, in rank order.
    std::vector<std::string> go(l->needed_nodes);
    for (const auto& a : out.assignments)
      if (a.go) go[a.node_index] = a.node;
    std::string nodes;
    for (const auto& n : go) nodes += (nodes.empty() ? "" : ",") + n;
    (void)Transition(l->run_id, RunState::kRunning, out.reason, "{}", [&](Store& s) {
      RETURN_IF_ERROR(s.SetAttemptNodes(l->run_id, l->attempt, nodes));
      return s.SetAttemptLaunches(l->run_id, l->attempt, l->launch);
    });
    AnswerWaiting(l);
    return;
  }
  AnswerWaiting(l);
  // Abort: end this Slurm job and queue a new attempt; the failing nodes are
  // quarantined now, so the next submission excludes them.
  if (attempt.ok() && attempt->has_value() && !(*attempt)->slurm_job_id.empty()) {
    asio::post(slurm_pool_, [this, job = (*attempt)->slurm_job_id] { (void)slurm_->Cancel(job); });
  }
  std::string why = "gate aborted attempt " + std::to_string(l->attempt) + ": " + out.reason;
  (void)Transition(l->run_id, RunState::kQueued, why, "{}", [&](Store& s) {
    return s.EndAttempt(l->run_id, l->attempt, 75, why, clock_->Now());
  });
}

void Controller::RecordGate(LaunchState* l, const GateOutcome& out) {
  std::vector<NodeGateView> nodes;
  for (const auto& v : out.verdicts) {
    NodeGateView n{v.node, v.passed ? "standby" : "fail", v.reasons, v.score, {}};
    for (const auto& a : out.assignments)
      if (a.node == v.node && a.go) n.decision = "go";
    if (out.kind == GateOutcome::kAbort && v.passed) n.decision = "standby";
    auto probe = l->probes.find(v.node);
    if (probe != l->probes.end())
      n.probe = probe->second;
    else
      n.decision = "missing";
    nodes.push_back(std::move(n));
  }
  GateRecordRow row{l->attempt, l->launch, clock_->Now(),
                    out.kind == GateOutcome::kGo ? "GO" : "ABORT", out.reason,
                    PolicyToJson(l->policy), NodeGatesToJson(nodes)};
  absl::Status st = store_->AddGateRecord(l->run_id, row);
  if (!st.ok()) spdlog::error("run {}: gate record not stored: {}", l->run_id, std::string(st.message()));
}

void Controller::AnswerWaiting(LaunchState* l) {
  const GateOutcome& out = *l->outcome;
  // Indexed by node: thousands of nodes wait here at once.
  std::unordered_map<std::string, const NodeAssignment*> assignment;
  for (const auto& a : out.assignments) assignment[a.node] = &a;
  std::unordered_map<std::string, const NodeVerdict*> failed;
  for (const auto& v : out.verdicts)
    if (!v.passed) failed[v.node] = &v;
  GateAnswer common;
  common.reason = out.reason;
  common.kind = out.kind == GateOutcome::kAbort ? GateAnswer::kAbort : GateAnswer::kStandby;
  if (out.kind == GateOutcome::kGo) {
    for (const auto& a : out.assignments)
      if (a.go && a.node_index == 0) common.master_addr = l->hostnames[a.node];
    common.ranks_per_node = l->ranks_per_node;
    common.world_size = l->needed_nodes * l->ranks_per_node;
    auto run = store_->GetRun(l->run_id);
    // Distinct per launch, so runs sharing a host do not collide; the run
    // directory (under this controller's output root) keeps two controllers'
    // runs of the same id apart too.
    const std::string launch_key = (run.ok() ? run->run_dir : l->run_id) + "/" +
                                   std::to_string(l->attempt) + "/" + std::to_string(l->launch);
    common.master_port =
        config_.master_port + static_cast<int>(std::hash<std::string>{}(launch_key) % 2000);
    common.checkpoint_dir = run.ok() ? run->run_dir + "/checkpoints" : "";
    // A relaunch or a new attempt continues from the last complete checkpoint.
    common.resume_step =
        common.checkpoint_dir.empty() ? -1 : NewestCompleteCheckpoint(common.checkpoint_dir);
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
    w.reply(ans);
  }
  l->waiting.clear();
}

void Controller::AbortLaunches(const std::string& run_id, const std::string& reason) {
  for (auto& [key, l] : launches_) {
    if (l.run_id != run_id) continue;
    if (l.gate_timer) l.gate_timer->cancel();
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

void Controller::KeepRankLatest(const WorkerId& id, int rank, const StepRecord& record) {
  using Result = RankLatestTable::Result;
  Result r = rank_latest_.Record(id.run_id, id.attempt, id.launch, rank, id.node, record,
                                 clock_->Now());
  if (r == Result::kNoSet) {
    // The launch's first record here (or the first since the controller
    // started): one read for the world size; an ended run starts no set.
    auto run = store_->GetRun(id.run_id);
    if (!run.ok() || IsTerminal(run->state)) return;
    if (rank_latest_.Begin(id.run_id, id.attempt, id.launch, run->nodes * run->ranks_per_node))
      r = rank_latest_.Record(id.run_id, id.attempt, id.launch, rank, id.node, record,
                              clock_->Now());
  }
  if (r == Result::kOutOfRange)
    spdlog::debug("run {}: step record of rank {} from {} is outside the world; not kept",
                  id.run_id, rank, id.node);
}

void Controller::RecordStep(WorkerId id, int rank, StepRecord record) {
  asio::post(io_, [this, id = std::move(id), rank, record] {
    KeepRankLatest(id, rank, record);
    auto row = store_->RecordStep(id.run_id, id.attempt, id.launch, record.step, record.loss,
                                  record.tokens, record.step_seconds, EncodeStepRecord(record),
                                  clock_->Now());
    if (!row.ok()) {
      return spdlog::warn("run {}: step not stored: {}", id.run_id,
                          std::string(row.status().message()));
    }
    // Watchers see a step once every rank has reported it (the summary is
    // then complete); when the world size is unknown (after a controller
    // restart), every update.
    auto it = launches_.find({id.run_id, id.attempt, id.launch});
    int world = it == launches_.end() ? 0 : it->second.needed_nodes * it->second.ranks_per_node;
    if (world == 0 || row->ranks == world) watchers_.Step(id.run_id, *row);
  });
}

void Controller::RecordRankExit(WorkerId id, RankExitInfo exit) {
  asio::post(io_, [this, id = std::move(id), exit = std::move(exit)] {
    auto it = launches_.find({id.run_id, id.attempt, id.launch});
    if (it == launches_.end()) return;
    for (const auto& e : it->second.rank_exits)
      if (e.rank == exit.rank) return;
    it->second.rank_exits.push_back(exit);
  });
}

void Controller::ReportExit(WorkerId id, std::vector<RankExitInfo> exits, int exit_code,
                            std::string reason, Reply<bool> reply) {
  asio::post(io_, [this, id = std::move(id), exits = std::move(exits), exit_code,
                   reason = std::move(reason), reply = std::move(reply)] {
    auto a = CheckWorker(id);
    if (!a.ok()) return reply(a.status());
    spdlog::info("run {} attempt {} launch {}: worker on {} exited {}: {}", id.run_id, id.attempt,
                 id.launch, id.node, exit_code, reason);
    auto it = launches_.find({id.run_id, id.attempt, id.launch});
    if (it != launches_.end()) {
      it->second.reported[id.node] = true;
      for (const auto& e : exits) {
        auto& known = it->second.rank_exits;
        known.erase(std::remove_if(known.begin(), known.end(),
                                   [&](const RankExitInfo& k) { return k.rank == e.rank; }),
                    known.end());
        known.push_back(e);
      }
    }
    reply(true);
  });
}

void Controller::NextLaunch(WorkerId id, int step_exit_code, Reply<NextLaunchAnswer> reply) {
  asio::post(io_, [this, id = std::move(id), step_exit_code, reply = std::move(reply)] {
    auto a = CheckWorker(id);
    if (!a.ok()) return reply(a.status());
    auto run = store_->GetRun(id.run_id);
    if (!run.ok()) return reply(run.status());
    NextLaunchAnswer ans;
    ans.exit_code = step_exit_code;
    auto it = launches_.find({id.run_id, id.attempt, id.launch});
    if (run->state == RunState::kRunning && a->live()) {
      // After a controller restart the launch's reports are gone: srun's status decides.
      bool known = it != launches_.end() && it->second.outcome &&
                   it->second.outcome->kind == GateOutcome::kGo;
      int go_nodes = known ? it->second.needed_nodes : 0;
      LaunchOutcome o = SettleLaunch(step_exit_code, known ? it->second.rank_exits
                                                           : std::vector<RankExitInfo>{},
                                     known ? static_cast<int>(it->second.reported.size()) : 0,
                                     go_nodes);
      if (!known && step_exit_code == 0) o = {true, 0, "srun step exited 0"};
      ans.exit_code = o.exit_code;
      ans.reason = o.reason;
      if (o.succeeded) {
        (void)Transition(id.run_id, RunState::kSucceeded, o.reason, "{}", [&](Store& s) {
          return s.EndAttempt(id.run_id, id.attempt, 0, o.reason, clock_->Now());
        });
      } else {
        FailAttempt(id.run_id, id.attempt, o.exit_code, o.reason,
                    "{\"step_exit_code\":" + std::to_string(step_exit_code) + "}");
      }
    } else {
      ans.reason = "run is " + std::string(StateName(run->state));
    }
    if (it != launches_.end()) launches_.erase(it);
    reply(ans);
  });
}

}  // namespace trellis::controller
