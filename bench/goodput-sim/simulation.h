#pragma once
// The simulation behind Simulate (simulator.h): one run's life under the
// controller's decisions. Internal to the simulator: simulator.cc has the
// run's attempts and launches, simulator_ahead.cc the continuations ahead.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bench/goodput-sim/cluster.h"
#include "bench/goodput-sim/ledger.h"
#include "bench/goodput-sim/rng.h"
#include "bench/goodput-sim/scenario.h"
#include "bench/goodput-sim/simulator.h"
#include "bench/goodput-sim/spare_pool.h"
#include "bench/goodput-sim/trace.h"
#include "common/clock.h"
#include "common/spec/run_spec.h"
#include "controller/core/continuation.h"
#include "controller/core/failure_class.h"
#include "controller/core/quarantine.h"
#include "controller/core/recovery.h"

namespace trellis::bench {

// How a launch's RUNNING ended.
struct LaunchEnd {
  enum How { kHorizon, kTimeLimit, kFailure, kHandoff } how = kHorizon;
  int64_t at_ms = 0;
  int64_t lost_ms = 0;  // training since its last checkpoint (kFailure)
  FaultKind kind = FaultKind::kDeviceError;
  std::string culprit;
};

// A continuation submitted ahead (Strategy::continuation_ahead), waiting in
// Slurm's queue.
struct Waiting {
  int64_t eligible_ms = 0;  // its --begin
  int64_t wait_ms = 0;      // the queue wait it has once eligible
  std::vector<std::string> excluded;  // its --exclude, when it was submitted
  int64_t up_ms() const { return eligible_ms + wait_ms; }  // its allocation starts
};

// How an attempt begins: its allocation has started (or starts at once).
struct AttemptStart {
  int64_t alloc_ms = 0;     // the job started: its time limit counts from here
  int64_t eligible_ms = 0;  // as the controller keeps it, for the queue waits seen
  std::vector<std::string> excluded;
  int64_t setup_s = 0;           // from now to training
  int64_t* setup = nullptr;      // the ledger's bucket for it
};

// What follows an attempt: an sbatch once `not_before` is reached, or the
// continuation that waited ahead, already waited for.
struct NextAttempt {
  int64_t not_before = 0;
  bool after_time_limit = false;
  std::optional<AttemptStart> taken;
};

class Simulation {
 public:
  Simulation(const Scenario& sc, const Strategy& st, const std::vector<TraceEvent>& trace,
             uint64_t seed);

  SimResult Run();

 private:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  static int64_t Ms(int64_t s) { return s * 1000; }
  static int64_t MsOfSeconds(double s) { return std::llround(s * 1000); }
  int64_t CheckpointEveryMs() const;  // Strategy::checkpoint_auto

  WallTime Wall(int64_t ms) const { return start_ + std::chrono::milliseconds(ms); }
  int64_t MsOf(WallTime t) const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t - start_).count();
  }

  // Time passes to `until` (at most the horizon), charged to `bucket`; false
  // once the horizon is reached.
  bool Spend(int64_t until, int64_t* bucket);

  // The nodes to keep out now (sbatch --exclude), certified return's checks
  // resolved up to now.
  std::vector<std::string> Excluded();
  // The same at `ms`, within a launch's training (no strike of the run comes
  // then; a failed check's may).
  std::vector<std::string> ExcludedAt(int64_t ms);

  // Certified return (Strategy::certify_return), as NodeCertifier does it:
  // each node whose quarantine expired gets a check job at its expiry, its
  // result certify_check_s later; a fail is a new strike. Resolved lazily up
  // to `ms`, which never goes back (the simulation asks in time order).
  void Certify(int64_t ms);
  void CertifyNode(controller::QuarantineEntry& e, int64_t ms);

  // One allocation: its launches until it ends. Returns how the next attempt
  // begins; nullopt when the simulation is over.
  std::optional<NextAttempt> RunAttempt(const AttemptStart& start);

  // The launch gate: every node passes (the memory probe does not see these
  // faults); DecideGate picks which go and which stand by as spares.
  std::vector<std::string> Gate(const std::vector<std::string>& allocation) const;

  // Training from now to the first of: the next interruption of the trace,
  // a faulty node failing again, the time limit, the horizon.
  LaunchEnd RunLaunch(const std::vector<std::string>& go, int64_t job_end, int launch);

  // Checkpointed segments (compute, then the stall) from `from` to end.at_ms;
  // each is one step in the controller's record. The partial segment at the
  // end is lost (a failure), checkpointed (the time limit: the stall takes
  // its last seconds) or still running (the horizon). A checkpoint written
  // behind the steps (Scenario::checkpoint_write_s) that a failure comes
  // before is lost too, with its segment, and the launch after it runs that
  // step again.
  void Train(int64_t from, LaunchEnd& end, int launch);

  // From an interruption of `kind` to the controller noticing it.
  int64_t DetectionMs(FaultKind kind) const;

  // Noticing the failure, classifying it, striking the blamed node and asking
  // DecideRecovery, with the spare pool's standing job if any (a draw
  // submits the refill); nullopt when the horizon came first.
  std::optional<controller::RecoveryDecision> AfterFailure(
      const LaunchEnd& end, const std::vector<std::string>& go,
      const std::vector<std::string>& allocation, int64_t job_end, int64_t go_at);

  // `go_at`: when the launch that ended started training (nullopt: it never
  // did); with its end and class it joins the run's launches, as the store
  // keeps them, for the backoff.
  controller::RecoveryDecision Decide(const controller::LaunchVerdict& v,
                                      const std::vector<std::string>& allocation,
                                      std::set<std::string> unhealthy,
                                      std::optional<int64_t> go_at,
                                      std::optional<controller::StandingPool> pool = {});

  void StrikeNode(const controller::LaunchVerdict& v);

  std::optional<NextAttempt> TimeLimit(const std::vector<std::string>& nodes,
                                       std::optional<int64_t> go_at);

  // Continuations ahead (simulator_ahead.cc), for a launch training from
  // `run_start` until `until` (its failure, the time limit or the horizon):
  // the continuation is submitted once DecideAhead says so while the launch
  // trains, and its allocation takes over when it starts (at the launch's
  // start when it started before it: the handoff waited for the launch's
  // GO). Returns the handoff's time; kNever when none comes before `until`.
  int64_t Ahead(int64_t run_start, int64_t until, int64_t job_end);

  // The waiting continuation's allocation started while the launch trained:
  // the launch stopped at a step boundary with a checkpoint, and the new
  // allocation's ranks start from it (relaunch_s; its workers registered and
  // passed the gate while the launch trained).
  std::optional<NextAttempt> Handoff(const std::vector<std::string>& nodes, int64_t go_at);

  // A new attempt while a continuation waits ahead (Scheduler::TakeUpWaiting):
  // RESTARTING -> SUBMITTED, and the waiting job is the new attempt. Already
  // started: its held workers take over (relaunch_s to training). Otherwise
  // it is released (ReleaseJob) when it would become eligible only after the
  // run may go on, or when the nodes to keep out changed: eligible from then
  // on (now, or after a failure's backoff), keeping the queue time it has
  // served, and kept off today's quarantine; then the job start.
  std::optional<NextAttempt> TakeUp(const controller::RecoveryDecision& d);

  // The attempt ends (and the pool jobs it drew with it): back to QUEUED
  // until `not_before` (or the continuation waiting ahead takes over), or
  // FAILED.
  std::optional<NextAttempt> EndAttempt(const controller::RecoveryDecision& d);

  SimResult Finish();

  const Scenario& sc_;
  const Strategy& st_;
  const std::vector<TraceEvent>& trace_;
  Cluster cluster_;
  Rng queue_rng_, alloc_rng_, repeat_rng_;
  Rng ahead_rng_;  // the queue waits of continuations ahead: the other rows' draws stay theirs
  Rng certify_rng_;  // whether a check catches a fault: a stream of its own, as ahead_rng_
  const int64_t horizon_;
  FakeClock clock_;
  const WallTime start_;
  int64_t now_ = 0;  // ms since start_, what clock_ shows
  spec::RestartSection policy_;
  controller::QuarantineConfig qconfig_;  // the controller's defaults
  std::map<std::string, controller::QuarantineEntry> quarantine_;
  std::set<std::string> struck_;
  int64_t certified_to_ = 0;  // Certify has resolved the checks up to here
  size_t next_trace_ = 0;
  int attempt_ = 0;
  int64_t step_ = 0;  // the newest checkpoint's step
  int restarts_ = 0;
  std::vector<controller::PastLaunch> launches_;  // settled, oldest first
  controller::FailureClass decided_class_ = controller::FailureClass::kRankExit;  // the newest
  std::vector<controller::AttemptQueueFacts> queue_facts_;  // every attempt's, oldest first
  std::optional<Waiting> waiting_;  // the continuation waiting ahead
  SparePool pool_;                  // Strategy::spare_pool_nodes
  Ledger led_;
  Counts counts_;
  GoodputLog log_;
};

}  // namespace trellis::bench
