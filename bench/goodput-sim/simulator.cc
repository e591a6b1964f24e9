#include "bench/goodput-sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/goodput-sim/evidence.h"
#include "bench/goodput-sim/simulation.h"
#include "common/checkpoint_interval.h"
#include "controller/core/certify.h"
#include "controller/core/decisions.h"
#include "controller/core/failure_class.h"
#include "controller/core/quarantine.h"
#include "controller/core/recovery.h"

namespace trellis::bench {

double SimResult::effective_ratio() const {
  return horizon_ms > 0 ? static_cast<double>(ledger.productive_ms) / horizon_ms : 0;
}

namespace {

using controller::RecoveryDecision;
using controller::RunState;
using std::chrono::milliseconds;

}  // namespace

Simulation::Simulation(const Scenario& sc, const Strategy& st,
                       const std::vector<TraceEvent>& trace, uint64_t seed)
    : sc_(sc),
      st_(st),
      trace_(trace),
      cluster_(sc.cluster_nodes),
      queue_rng_(seed, 3),
      alloc_rng_(seed, 4),
      repeat_rng_(seed, 5),
      ahead_rng_(seed, 6),
      certify_rng_(seed, 8),
      horizon_(Ms(sc.horizon_s)),
      start_(clock_.Now()),
      pool_(sc, st.spare_pool_nodes, seed) {
  policy_.max_restarts = st.max_restarts;
  policy_.backoff_s = st.backoff_s;
  policy_.hang_timeout_s = static_cast<int>(sc.hang_timeout_s);
  policy_.heartbeat_timeout_s = static_cast<int>(sc.crash_detect_s);
  policy_.relaunch_in_allocation = st.relaunch_in_allocation;
  policy_.backoff_reset_s = st.backoff_reset_s;
  policy_.continuation = st.continuation_ahead ? "ahead" : "after";
  policy_.continuation_lead_s = st.continuation_lead_s;
  policy_.spare_pool_nodes = st.spare_pool_nodes;
  qconfig_.certify_return = st.certify_return;
}

SimResult Simulation::Run() {
  log_.Change(Wall(0), RunState::kQueued);
  NextAttempt next;
  for (;;) {
    AttemptStart start;
    if (next.taken) {
      start = std::move(*next.taken);
    } else {
      const int64_t from = now_;
      const bool go_on = Spend(next.not_before, &led_.backoff_ms);
      if (next.after_time_limit) counts_.queue_after_time_limit_ms += now_ - from;
      if (!go_on) break;
      log_.Change(Wall(now_), RunState::kSubmitted);
      start.excluded = Excluded();  // sbatch --exclude
      start.eligible_ms = now_;
      int64_t wait =
          std::llround(queue_rng_.LogNormal(sc_.queue_median_s, sc_.queue_sigma) * 1000);
      const int64_t queued = now_;
      const bool started = Spend(now_ + wait, &led_.queue_ms);
      if (next.after_time_limit) counts_.queue_after_time_limit_ms += now_ - queued;
      if (!started) break;
      start.alloc_ms = now_;
      start.setup_s = sc_.job_start_s;
      start.setup = &led_.start_ms;
    }
    std::optional<NextAttempt> n = RunAttempt(start);
    if (!n) break;
    next = std::move(*n);
  }
  return Finish();
}

bool Simulation::Spend(int64_t until, int64_t* bucket) {
  int64_t to = std::min(until, horizon_);
  if (to > now_) {
    *bucket += to - now_;
    clock_.Advance(milliseconds(to - now_));
    now_ = to;
  }
  return until < horizon_;
}

std::vector<std::string> Simulation::Excluded() { return ExcludedAt(now_); }

std::vector<std::string> Simulation::ExcludedAt(int64_t ms) {
  if (!st_.quarantine) return {};
  Certify(ms);
  std::vector<controller::QuarantineEntry> entries;
  for (const auto& [node, e] : quarantine_) entries.push_back(e);
  return controller::ExcludedNodes(entries, Wall(ms), qconfig_);
}

std::optional<NextAttempt> Simulation::RunAttempt(const AttemptStart& start) {
  ++counts_.attempts;
  ++attempt_;
  const int64_t job_end =
      sc_.time_limit_s > 0 ? start.alloc_ms + Ms(sc_.time_limit_s) : kNever;
  std::vector<std::string> off = start.excluded;
  if (pool_.enabled() && !pool_.submitted()) pool_.Submit(now_);  // once the run's job runs
  if (pool_.enabled())  // Slurm gives a standing pool job's nodes to no other job
    if (auto standing = pool_.Standing(now_, Excluded(), cluster_, job_end))
      off.insert(off.end(), standing->nodes.begin(), standing->nodes.end());
  std::vector<std::string> allocation =
      cluster_.Allocate(off, sc_.nodes_needed + st_.spares, alloc_rng_);
  log_.Change(Wall(now_), RunState::kGating);
  // The queue waits the controller sees: an attempt's first GO less when it
  // became eligible (controller/app/continuations.cc).
  queue_facts_.push_back({"", Wall(start.eligible_ms), std::nullopt});
  const size_t facts = queue_facts_.size() - 1;
  int64_t ready = now_ + Ms(start.setup_s);
  int64_t* setup = start.setup;
  for (int launch = 1;; ++launch) {
    if (!Spend(std::min(ready, job_end), setup)) return std::nullopt;
    if (now_ >= job_end) return TimeLimit(allocation, std::nullopt);
    std::vector<std::string> go = Gate(allocation);
    log_.Change(Wall(now_), RunState::kRunning);
    if (!queue_facts_[facts].started) queue_facts_[facts].started = Wall(now_);
    const int64_t go_at = now_;
    LaunchEnd end = RunLaunch(go, job_end, launch);
    if (end.how == LaunchEnd::kHorizon) return std::nullopt;
    if (end.how == LaunchEnd::kTimeLimit) return TimeLimit(go, go_at);
    if (end.how == LaunchEnd::kHandoff) return Handoff(go, go_at);
    std::optional<RecoveryDecision> d = AfterFailure(end, go, allocation, job_end, go_at);
    if (!d) return std::nullopt;
    if (d->kind != RecoveryDecision::kRelaunch) return EndAttempt(*d);
    ++counts_.relaunches;
    allocation = d->nodes;
    ready = now_ + Ms(sc_.relaunch_s);
    setup = &led_.relaunch_ms;
  }
}

std::vector<std::string> Simulation::Gate(const std::vector<std::string>& allocation) const {
  std::vector<controller::NodeVerdict> verdicts;
  for (const auto& n : allocation) verdicts.push_back({n, true, {}, 1.0, {}});
  controller::GateOutcome g = controller::DecideGate(
      verdicts, {}, static_cast<int>(allocation.size()), sc_.nodes_needed, sc_.ranks_per_node,
      /*timed_out=*/false, std::chrono::seconds(120));
  if (g.kind != controller::GateOutcome::kGo)
    throw std::runtime_error("gate: " + g.reason + " (too few eligible nodes in the cluster)");
  std::vector<std::string> go;
  for (const auto& a : g.assignments)
    if (a.go) go.push_back(a.node);
  return go;
}

LaunchEnd Simulation::RunLaunch(const std::vector<std::string>& go, int64_t job_end, int launch) {
  const int64_t run_start = now_;
  for (; next_trace_ < trace_.size() && trace_[next_trace_].at_ms < run_start; ++next_trace_)
    ++counts_.trace_idle;  // it came while nothing of this run ran
  int64_t at_trace = next_trace_ < trace_.size() ? trace_[next_trace_].at_ms : kNever;
  auto repeat = cluster_.NextRepeat(go, run_start, sc_.repeat_mean_s, repeat_rng_);
  int64_t at_fail = std::min(at_trace, repeat ? repeat->at_ms : kNever);

  LaunchEnd end;
  end.at_ms = std::min({at_fail, job_end, horizon_});
  end.how = end.at_ms == horizon_  ? LaunchEnd::kHorizon
            : end.at_ms == at_fail ? LaunchEnd::kFailure
                                   : LaunchEnd::kTimeLimit;
  if (st_.continuation_ahead) {
    const int64_t at_handoff = Ahead(run_start, end.at_ms, job_end);
    if (at_handoff < end.at_ms) {
      end.at_ms = at_handoff;
      end.how = LaunchEnd::kHandoff;
    }
  }
  if (end.how == LaunchEnd::kFailure && at_fail == at_trace) {
    const TraceEvent& e = trace_[next_trace_++];
    end.kind = e.kind;
    end.culprit = go[std::min<size_t>(go.size() - 1, e.culprit_u * go.size())];
    ++counts_.interruptions[std::string(FaultKindName(e.kind))];
  } else if (end.how == LaunchEnd::kFailure) {
    end.kind = repeat->kind;
    end.culprit = repeat->node;
    ++counts_.repeats[std::string(FaultKindName(repeat->kind))];
  }
  Train(run_start, end, launch);
  return end;
}

int64_t Simulation::CheckpointEveryMs() const {
  if (!st_.checkpoint_auto) return Ms(sc_.checkpoint_every_s);
  CheckpointIntervalInput in;  // the spec's default bounds
  in.cost_s = sc_.checkpoint_stall_s;
  in.step_s = 0.001;  // the simulation has no steps: a period to the millisecond
  in.mtbf_s = sc_.interruptions > 0
                  ? static_cast<double>(sc_.horizon_s) / sc_.interruptions
                  : 1e12;  // no failure: the upper bound
  return ChooseCheckpointInterval(in).steps;
}

void Simulation::Train(int64_t from, LaunchEnd& end, int launch) {
  const int64_t every = CheckpointEveryMs(), stall = MsOfSeconds(sc_.checkpoint_stall_s);
  const int64_t segment = every + stall;
  // A stop writes its checkpoint in place: the copy's stall and the write.
  const int64_t write = Ms(sc_.checkpoint_write_s), stop_stall = stall + write;
  const int64_t full = (end.at_ms - from) / segment;
  const int64_t rest = end.at_ms - from - full * segment;
  controller::LaunchSteps steps;
  steps.attempt = attempt_;
  steps.launch = launch;
  steps.last_step_time = milliseconds(segment);
  for (int64_t i = 1; i <= full; ++i) steps.marks.push_back({++step_, Wall(from + i * segment)});
  led_.productive_ms += full * every;
  led_.stall_ms += full * stall;
  switch (end.how) {
    case LaunchEnd::kFailure:
      end.lost_ms = rest;
      if (full > 0 && rest < write) {  // the newest checkpoint was not on disk yet
        end.lost_ms += segment;
        led_.productive_ms -= every;
        led_.stall_ms -= stall;
        --step_;  // the step is in the record; the next launch runs it again
      }
      led_.redone_ms += end.lost_ms;
      break;
    case LaunchEnd::kTimeLimit:
    case LaunchEnd::kHandoff:  // stopped at a step boundary with a checkpoint
      led_.productive_ms += std::max<int64_t>(0, rest - stop_stall);
      led_.stall_ms += std::min(rest, stop_stall);
      if (rest > 0) {
        steps.marks.push_back({++step_, Wall(end.at_ms)});
        steps.last_step_time = milliseconds(rest);
      }
      break;
    case LaunchEnd::kHorizon:
      led_.productive_ms += std::min(rest, every);
      led_.stall_ms += rest - std::min(rest, every);
      break;
  }
  if (!steps.marks.empty()) log_.launches.push_back(std::move(steps));
  clock_.Advance(milliseconds(end.at_ms - now_));
  now_ = end.at_ms;
}

std::optional<RecoveryDecision> Simulation::AfterFailure(
    const LaunchEnd& end, const std::vector<std::string>& go,
    const std::vector<std::string>& allocation, int64_t job_end, int64_t go_at) {
  if (LeavesNodeFaulty(end.kind))
    cluster_.MarkFaulty(end.culprit, end.kind, now_, now_ + Ms(sc_.site_repair_s));
  const int64_t detect = DetectionMs(end.kind);
  if (!Spend(std::min(end.at_ms + detect, job_end), &led_.detection_ms)) {
    led_.undetected_at_end_ms = end.lost_ms + (now_ - end.at_ms);
    return std::nullopt;
  }
  log_.Change(Wall(now_), RunState::kRestarting);
  controller::LaunchEvidence ev =
      EvidenceOf(end.kind, end.culprit, go, sc_.ranks_per_node, step_, detect / 1000.0);
  if (now_ >= job_end) {  // Slurm ended the job before the failure was noticed
    ev.time_limit = true;
    ev.hang.reset();  // the hang detector had not fired yet
  }
  controller::LaunchVerdict v = controller::ClassifyLaunch(ev);
  if (v.cls == controller::FailureClass::kTimeLimit)
    ++counts_.time_limit_stops;
  else
    ++counts_.verdicts[std::string(controller::FailureClassName(v.cls))];
  // As the controller's shell: lost and quarantined nodes are unhealthy;
  // the decision comes before this launch's strike is applied.
  std::set<std::string> unhealthy(ev.lost_nodes.begin(), ev.lost_nodes.end());
  for (const auto& n : Excluded()) unhealthy.insert(n);
  std::optional<controller::StandingPool> pool;
  if (pool_.enabled()) {
    std::vector<std::string> unavailable = Excluded();
    unavailable.insert(unavailable.end(), allocation.begin(), allocation.end());
    pool = pool_.Standing(now_, unavailable, cluster_, job_end);
  }
  const bool pool_queued = pool_.enabled() && !pool;
  RecoveryDecision d = Decide(v, allocation, unhealthy, go_at, std::move(pool));
  if (st_.quarantine && !v.blamed_node.empty()) StrikeNode(v);
  if (!d.draws_pool.empty()) pool_.Drawn(now_, job_end);  // and the refill's sbatch
  if (d.kind == RecoveryDecision::kNewAttempt && v.cls != controller::FailureClass::kTimeLimit) {
    ++counts_.new_attempts_after_failure;
    if (pool_queued) pool_.QueuedAtNeed();
  }
  return d;
}

int64_t Simulation::DetectionMs(FaultKind kind) const {
  switch (kind) {
    case FaultKind::kHang:
      return Ms(sc_.hang_timeout_s);
    case FaultKind::kDeviceError:  // the rank ends with its error: its worker says so
    case FaultKind::kSameExit:
      return Ms(sc_.exit_detect_s);
    case FaultKind::kNodeLost:  // the heartbeat timeout
    case FaultKind::kNcclOneNode:
    case FaultKind::kNcclEverywhere:
      break;
  }
  return Ms(sc_.crash_detect_s);
}

RecoveryDecision Simulation::Decide(const controller::LaunchVerdict& v,
                                    const std::vector<std::string>& allocation,
                                    std::set<std::string> unhealthy,
                                    std::optional<int64_t> go_at,
                                    std::optional<controller::StandingPool> pool) {
  controller::RecoveryInput in;
  in.verdict = v;
  in.allocation_nodes = allocation;
  in.pool = std::move(pool);
  in.unhealthy = std::move(unhealthy);
  in.nodes_needed = sc_.nodes_needed;
  in.restarts_so_far = restarts_;
  in.earlier_launches = launches_;
  if (go_at) in.launch_started = Wall(*go_at);
  in.policy = policy_;
  in.now = clock_.Now();
  RecoveryDecision d = controller::DecideRecovery(in);
  decided_class_ = v.cls;
  if (d.uses_restart) ++restarts_;
  if (go_at) launches_.push_back({Wall(*go_at), clock_.Now(), v.cls});
  return d;
}

void Simulation::Certify(int64_t ms) {
  if (!qconfig_.certify_return) return;
  if (ms < certified_to_) throw std::logic_error("certified return: asked back in time");
  certified_to_ = ms;
  for (auto& [node, e] : quarantine_) CertifyNode(e, ms);
}

void Simulation::CertifyNode(controller::QuarantineEntry& e, int64_t ms) {
  using controller::CertifyAction;
  for (;;) {
    if (!controller::CheckInFlight(e)) {
      // Submitted at the expiry: the check job's own queue wait is not modelled.
      if (!e.expiry || MsOf(*e.expiry) > ms) return;
      if (controller::DecideCertify(e, *e.expiry, qconfig_, {}).action != CertifyAction::kSubmit)
        return;  // certified already, or released
      e.last_check = controller::NodeCheck{"sim", *e.expiry, std::nullopt, false, ""};
      ++counts_.certify.checks;
    }
    const int64_t started = MsOf(e.last_check->started);
    const int64_t done = started + Ms(st_.certify_check_s);
    if (done > ms) return;
    // The node as the check finds it: a fault the site repaired since is gone.
    const bool faulty = cluster_.IsFaulty(e.node, started);
    const bool caught = faulty && certify_rng_.Uniform() < st_.certify_catch;
    if (faulty && !caught) ++counts_.certify.passed_faulty;
    const controller::CheckResult found{caught ? 1 : 0, caught ? "fault found" : "ok"};
    const controller::CertifyDecision d = controller::DecideCertify(e, Wall(done), qconfig_, found);
    const bool passed = d.action == CertifyAction::kPass;
    e.last_check = controller::EndCheck(*e.last_check, passed, d.summary, Wall(done));
    if (passed) return;  // on probation, strikes kept
    ++counts_.certify.failed;
    e = controller::Strike(e, e.node, "certification check failed: " + d.summary, "", "certify",
                           /*until_released=*/false, Wall(done), qconfig_);
  }
}

void Simulation::StrikeNode(const controller::LaunchVerdict& v) {
  const std::string& node = v.blamed_node;
  Certify(now_);  // the entry as it stands now
  auto it = quarantine_.find(node);
  std::optional<controller::QuarantineEntry> existing;
  if (it != quarantine_.end()) existing = it->second;
  quarantine_[node] = controller::Strike(existing, node, v.reason, v.evidence_json, "goodput-sim",
                                         /*until_released=*/false, clock_.Now(), qconfig_);
  ++counts_.strikes;
  struck_.insert(node);
  if (st_.quarantine_repairs) cluster_.Repair(node);
}

std::optional<NextAttempt> Simulation::TimeLimit(const std::vector<std::string>& nodes,
                                                 std::optional<int64_t> go_at) {
  ++counts_.time_limit_stops;
  log_.Change(Wall(now_), RunState::kRestarting);
  return EndAttempt(
      Decide(controller::ClassifyLaunch(TimeLimitEvidence(nodes)), nodes, {}, go_at));
}

std::optional<NextAttempt> Simulation::EndAttempt(const RecoveryDecision& d) {
  pool_.AttemptEnds(now_);
  if (d.kind == RecoveryDecision::kNewAttempt) {
    if (waiting_) return TakeUp(d);
    log_.Change(Wall(now_), RunState::kQueued);
    NextAttempt next;
    next.not_before = MsOf(d.not_before);
    next.after_time_limit = decided_class_ == controller::FailureClass::kTimeLimit;
    return next;
  }
  waiting_.reset();  // cancelled with the run
  log_.Change(Wall(now_), RunState::kFailed);
  counts_.run_failed = true;
  counts_.fail_reason = d.reason;
  led_.after_fail_ms = horizon_ - now_;
  return std::nullopt;
}

SimResult Simulation::Finish() {
  counts_.trace_idle += static_cast<int>(trace_.size() - next_trace_);
  counts_.restarts_used = restarts_;
  counts_.nodes_quarantined = static_cast<int>(struck_.size());
  counts_.pool = pool_.Finish(horizon_);
  SimResult r;
  r.ledger = led_;
  r.counts = counts_;
  r.horizon_ms = horizon_;
  r.check = CheckAgainstComputeGoodput(led_, log_, Wall(horizon_));
  return r;
}
SimResult Simulate(const Scenario& scenario, const Strategy& strategy,
                   const std::vector<TraceEvent>& trace, uint64_t seed) {
  return Simulation(scenario, strategy, trace, seed).Run();
}

}  // namespace trellis::bench
