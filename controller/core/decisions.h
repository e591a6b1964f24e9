#pragma once
// Pure decisions of the controller: functions of a snapshot and `now`,
// returning values. The shell (controller/app) gathers and applies.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/spec/run_spec.h"
#include "controller/core/failure_class.h"
#include "controller/core/gate_policy.h"
#include "controller/core/recovery.h"
#include "controller/core/run_state.h"
#include "controller/core/slurm_facts.h"

namespace trellis::controller {

// --- Scheduling a QUEUED run ---
struct ScheduleDecision {
  bool submit = false;
  std::string wait_reason;  // when !submit: "needs 4 nodes, 3 eligible", "backoff until ..."
};
ScheduleDecision DecideSchedule(int nodes_needed, int nodes_eligible, WallTime not_before,
                                WallTime now);

// A spec's slurm.account, and the QOS its slurm.extra_args ask (--qos=Q), against
// the user's associations in Slurm's accounting: "" when allowed, or when
// there are none to check against (no accounting, the user in none); else
// the error, naming the accounts or the account's QOS there are.
std::string RefusedAccountOrQos(const spec::SlurmSection& slurm,
                                const std::vector<SlurmAssociation>& associations);

// A spec's slurm.partition against the cluster's partitions: "" when it is
// one of them, or when either is unknown ("": the default partition; no
// list); else the error, naming the partitions there are.
std::string UnknownPartition(const std::string& partition, const std::vector<std::string>& known);

// Slurm's pending reason for a job that will not start while it stays so
// (its partition's or account's limits, nodes it asks that are unavailable):
// what it means, for the run's wait reason; "" for reasons that pass by
// themselves (Priority, Resources, BeginTime, ...).
std::string NeverStartsWhile(const std::string& pending_reason);

// --- The launch gate ---
struct NodeAssignment {
  std::string node;
  bool go = false;  // false: standby (a spare, or a node that failed the gate)
  int node_index = -1;
  int rank_offset = -1;
};
struct GateOutcome {
  enum Kind { kWaiting, kGo, kAbort } kind = kWaiting;
  std::vector<NodeAssignment> assignments;  // on kGo: every registered node
  std::vector<NodeVerdict> verdicts;        // every node, missing ones included
  std::vector<std::string> failed_nodes;    // to quarantine
  std::string reason;
};
// `registered`: the verdicts of the nodes that registered, in registration
// order. `allocated`: the allocation's node names where known (to name the
// nodes that never registered). Decides once every expected node has
// registered, or at the timeout with what has registered: the best
// `nodes_needed` passing nodes go (ranks in node-name order; nodes short of
// the ranks' host memory last, named in the reason), other passing nodes
// stand by as spares; fewer than needed pass: abort.
GateOutcome DecideGate(const std::vector<NodeVerdict>& registered,
                       const std::vector<std::string>& allocated, int expected_nodes,
                       int nodes_needed, int ranks_per_node, bool timed_out,
                       std::chrono::seconds timeout);

// node2 < node10: digit runs compare as numbers.
bool NaturalLess(const std::string& a, const std::string& b);

// How a launch ended: ClassifyLaunch in failure_class.h.

// --- After a failure ---
// Requeue with RestartBackoff() (recovery.h) until max_restarts are used.
// DecideRecovery (recovery.h) supersedes this once launches are classified.
// `earlier_launches`: the run's launches before the one that ended, oldest
// first, for BackoffRestarts (recovery.h); none: the backoff doubles with
// restarts_so_far.
struct RestartDecision {
  bool requeue = false;
  WallTime not_before;
  std::string reason;
};
RestartDecision DecideRestart(int restarts_so_far, const spec::RestartSection& policy,
                              const std::string& failure, WallTime now,
                              const std::vector<PastLaunch>& earlier_launches = {});

// --- Reconciling an attempt with Slurm ---
struct ExitFile {  // <attempt dir>/exit.json, written last by the batch script
  int exit_code = 0;
  int last_launch = 0;
  std::string reason;
  // SLURM_RESTART_COUNT of the batch script that wrote it; a job Slurm
  // requeued since then ended without a record of its own.
  std::optional<int> restarts;
};
struct Reconciliation {
  enum Kind { kAlive, kEnded } kind = kAlive;
  bool succeeded = false;
  int exit_code = 0;
  std::string reason;
  std::string nodelist;  // when Slurm says where it ran
  // Ended by its time limit (Slurm's TIMEOUT, or the batch script's
  // "wall-time warning") or preempted: not the program's fault, the run
  // continues in a new attempt at once, using no restart.
  std::optional<FailureClass> stopped_by;
};
// `job` is what Slurm knows (nullopt: forgotten or never seen), `written`
// what the batch script left; a record older than Slurm's last requeue of the
// job is set aside.
Reconciliation Reconcile(const std::optional<SlurmJob>& job,
                         const std::optional<ExitFile>& written);

// Slurm put the job back in its queue after its batch script had started
// (scontrol requeue, preemption with PreemptMode=REQUEUE, a failed node with
// --requeue): pending again while the run was past SUBMITTED. The run waits
// as SUBMITTED; the batch script, started again, asks for its next launch.
bool RequeuedBySlurm(RunState run_state, const SlurmJob& job);

}  // namespace trellis::controller
