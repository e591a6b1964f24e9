#pragma once
// Where a simulated run's wall time went, by cause, and what happened to it;
// plus the run's state changes and checkpoint steps as the controller would
// record them, so that the controller's ComputeGoodput can check the ledger
// (docs/architecture.md, "Goodput"). Pure.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "controller/core/goodput.h"

namespace trellis::bench {

struct Ledger {               // milliseconds; they add up to the horizon
  int64_t productive_ms = 0;  // training whose progress was kept
  int64_t stall_ms = 0;       // checkpoint stalls of kept progress
  int64_t redone_ms = 0;      // training since the last checkpoint, lost to an interruption
  int64_t detection_ms = 0;   // from the interruption to the controller noticing it
  int64_t relaunch_ms = 0;    // relaunching inside the allocation
  int64_t backoff_ms = 0;     // the controller's restart backoff before a new attempt's sbatch
  int64_t queue_ms = 0;       // a new attempt waiting in Slurm's queue
  int64_t start_ms = 0;       // a new allocation starting up to training
  // A handoff: from the launch's stop for the continuation waiting ahead to
  // the new allocation training (its ranks starting, the checkpoint loaded).
  int64_t handoff_ms = 0;
  int64_t after_fail_ms = 0;  // after the run FAILED (its restarts used up)
  // A failure at the horizon not yet noticed: to the controller this time
  // (its redone and detection part) still looks like running.
  int64_t undetected_at_end_ms = 0;

  int64_t total_ms() const;
};

// The spare pool (Strategy::spare_pool_nodes, spare_pool.h).
struct PoolCounts {
  int jobs_submitted = 0;  // the first, refills and replacements
  int draws = 0;           // relaunches that drew the standing pool job
  int queued_at_need = 0;  // new attempts after a failure while the pool job waited in the queue
  int expired = 0;         // standing pool jobs that reached their time limit undrawn
  // Standing pool jobs replaced because they would end before the run's job.
  int replaced_short = 0;
  // Drawn pool jobs whose own time limit came before the attempt that drew
  // them ended (none, with the replacements above; counted as a check).
  int drawn_outlived = 0;
  int64_t standing_ms = 0;  // a pool job stood, its nodes idle
};

// Certified return (Strategy::certify_return).
struct CertifyCounts {
  int checks = 0;         // check jobs run on nodes whose quarantine expired
  int failed = 0;         // of them, those that caught a fault: a new strike
  int passed_faulty = 0;  // those that missed a fault still there: back on probation
};

struct Counts {
  int attempts = 0;                          // allocations that started
  int new_attempts_after_failure = 0;        // DecideRecovery said kNewAttempt after a failure
  int time_limit_stops = 0;                  // continuations: kNewAttempt after the time limit
  int relaunches = 0;                        // DecideRecovery said kRelaunch
  int restarts_used = 0;                     // against restart.max_restarts
  int trace_idle = 0;                        // trace interruptions that came while no launch ran
  std::map<std::string, int> interruptions;  // hits of the trace, by fault kind
  std::map<std::string, int> repeats;        // failures of an already faulty node, by kind
  std::map<std::string, int> verdicts;       // ClassifyLaunch's class of each failed launch
  int strikes = 0;
  int nodes_quarantined = 0;  // distinct nodes struck
  bool run_failed = false;
  std::string fail_reason;
  // The queue wait (and backoff) of continuations after a time limit: part of
  // the ledger's queue_ms and backoff_ms.
  int64_t queue_after_time_limit_ms = 0;

  // Continuations ahead (Strategy::continuation_ahead).
  int ahead_submitted = 0;       // DecideAhead said submit
  int64_t ahead_lead_s_sum = 0;  // their leads, for the mean
  int handoffs = 0;              // its allocation started while the attempt trained
  int ahead_waited_at_limit = 0;  // the time limit came first: the run waited on for it
  int ahead_taken_after_failure = 0;  // a failure's new attempt took it

  PoolCounts pool;
  CertifyCounts certify;
};

// The run's record as the controller keeps it.
struct GoodputLog {
  std::vector<controller::StateChange> changes;
  std::vector<controller::LaunchSteps> launches;  // those with a step

  void Change(WallTime at, controller::RunState to, bool handoff = false) {
    changes.push_back({at, to, handoff});
  }
};

struct GoodputCheck {
  controller::Goodput goodput;  // ComputeGoodput's answer at the horizon
  bool agrees = false;
  std::string mismatch;  // why not, for people
};

// ComputeGoodput counts checkpoint stalls as running and cannot tell the
// detection of a failure from the step in flight; the check compares what it
// can tell: queued = backoff + queue, gating = start, running = productive +
// stalls (+ an undetected failure at the end), redone + restarting = redone +
// detection + relaunch (less that), handoff = handoff, and the total.
GoodputCheck CheckAgainstComputeGoodput(const Ledger& ledger, const GoodputLog& log,
                                        WallTime horizon);

}  // namespace trellis::bench
