// Continuations ahead (Strategy::continuation_ahead; docs/architecture.md,
// "Continuations ahead"): the Simulation's submitting the next attempt while
// a launch trains, the handoff to it, and a new attempt taking it up.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench/goodput-sim/evidence.h"
#include "bench/goodput-sim/simulation.h"
#include "controller/core/continuation.h"
#include "controller/core/failure_class.h"
#include "controller/core/recovery.h"
#include "controller/core/run_state.h"

namespace trellis::bench {

namespace {

using controller::RecoveryDecision;
using controller::RunState;
using std::chrono::seconds;

}  // namespace

int64_t Simulation::Ahead(int64_t run_start, int64_t until, int64_t job_end) {
  if (job_end == kNever) return kNever;
  if (!waiting_) {
    const controller::LeadChoice lead = controller::ChooseContinuationLead(
        st_.continuation_lead_s, controller::QueueWaitsOn(queue_facts_, ""), st_.signal_grace_s,
        seconds(sc_.time_limit_s));
    // The controller submits at the first snapshot that finds the run
    // RUNNING with at most the lead and the margin left.
    const int64_t at = std::max(
        run_start, job_end - Ms(lead.lead.count() + controller::kSubmitAheadMargin.count()));
    if (at >= until) return kNever;
    controller::AheadFacts f;
    f.ahead_mode = true;
    f.state = RunState::kRunning;
    f.has_waiting = false;
    f.time_limit = seconds(sc_.time_limit_s);
    f.time_left = seconds((job_end - at) / 1000);
    f.lead = lead.lead;
    const controller::AheadDecision d = controller::DecideAhead(f);
    if (!d.submit) return kNever;  // less than a second left
    Waiting w;
    w.eligible_ms = at + Ms(d.begin_in.count());
    w.wait_ms =
        std::llround(ahead_rng_.LogNormal(sc_.queue_median_s, sc_.queue_sigma) * 1000);
    w.excluded = ExcludedAt(at);
    waiting_ = std::move(w);
    ++counts_.ahead_submitted;
    counts_.ahead_lead_s_sum += lead.lead.count();
  }
  const int64_t at = std::max(run_start, waiting_->up_ms());
  return at < until ? at : kNever;
}

std::optional<NextAttempt> Simulation::Handoff(const std::vector<std::string>& nodes,
                                               int64_t go_at) {
  pool_.AttemptEnds(now_);
  ++counts_.handoffs;
  log_.Change(Wall(now_), RunState::kRestarting, /*handoff=*/true);
  controller::LaunchVerdict v = controller::ClassifyLaunch(HandoffEvidence(nodes));
  if (v.cls != controller::FailureClass::kHandoff)
    throw std::runtime_error("handoff classified " +
                             std::string(controller::FailureClassName(v.cls)));
  RecoveryDecision d = Decide(v, nodes, {}, go_at);
  if (d.kind != RecoveryDecision::kNewAttempt) {
    waiting_.reset();
    return EndAttempt(d);
  }
  Waiting w = std::move(*waiting_);
  waiting_.reset();
  log_.Change(Wall(now_), RunState::kSubmitted);
  NextAttempt next;
  AttemptStart start;
  start.alloc_ms = w.up_ms();
  start.eligible_ms = w.eligible_ms;
  start.excluded = std::move(w.excluded);
  start.setup_s = sc_.relaunch_s;
  start.setup = &led_.handoff_ms;
  next.taken = std::move(start);
  return next;
}

std::optional<NextAttempt> Simulation::TakeUp(const RecoveryDecision& d) {
  const bool at_limit = decided_class_ == controller::FailureClass::kTimeLimit;
  ++(at_limit ? counts_.ahead_waited_at_limit : counts_.ahead_taken_after_failure);
  Waiting w = std::move(*waiting_);
  waiting_.reset();
  log_.Change(Wall(now_), RunState::kSubmitted);
  AttemptStart start;
  start.eligible_ms = w.eligible_ms;  // the stored --begin: ReleaseJob does not change it
  if (w.up_ms() <= now_) {
    start.alloc_ms = w.up_ms();
    start.excluded = std::move(w.excluded);
    start.setup_s = sc_.relaunch_s;
    start.setup = &led_.start_ms;
  } else {
    const int64_t go_on = std::max(now_, MsOf(d.not_before));
    std::vector<std::string> exclude = Excluded(), was = w.excluded;
    std::sort(exclude.begin(), exclude.end());
    std::sort(was.begin(), was.end());
    const bool release = w.eligible_ms > go_on || exclude != was;
    const int64_t up = std::min(w.eligible_ms, go_on) + w.wait_ms;
    const int64_t alloc = release ? std::max(up, go_on) : up;
    const int64_t from = now_;
    // Waiting for Slurm, then (a job up before the backoff's end) the backoff.
    const bool go = Spend(up, &led_.queue_ms) && Spend(alloc, &led_.backoff_ms);
    if (at_limit) counts_.queue_after_time_limit_ms += now_ - from;
    if (!go) return std::nullopt;
    start.alloc_ms = alloc;
    start.excluded = std::move(exclude);
    start.setup_s = sc_.job_start_s;
    start.setup = &led_.start_ms;
  }
  NextAttempt next;
  next.after_time_limit = at_limit;
  next.taken = std::move(start);
  return next;
}
}  // namespace trellis::bench
