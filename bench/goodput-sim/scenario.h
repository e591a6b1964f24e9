#pragma once
// The goodput simulation's inputs: the physics and costs of the failure
// scenario (Scenario) and what the run does about failures (Strategy). Plain
// values; the defaults are the scenario the benchmark reports.

#include <cstdint>
#include <string>

namespace trellis::bench {

struct Scenario {
  int nodes_needed = 2048;
  int ranks_per_node = 8;  // GPUs per node
  // The partition the allocations come from; Slurm picks an allocation's nodes
  // uniformly among the eligible ones (assumption).
  int cluster_nodes = 2304;
  int64_t horizon_s = 54 * 86400;  // wall time from the first submission

  // The failure trace: this many interruptions in the horizon, at exponential
  // intervals; an interruption that comes while no launch runs hits nothing.
  int interruptions = 419;
  double share_node_evidence = 0.60;  // device error, lost worker, NCCL on one node
  double share_no_evidence = 0.25;    // NCCL error everywhere, same exit everywhere
  // the rest hang

  int64_t crash_detect_s = 30;   // a crash, or a lost worker's heartbeat timeout
  // A rank that ends by itself (a device error, the same exit code on
  // several nodes): its worker reports the exit; the scenario's is the
  // crash_detect_s of every crash.
  int64_t exit_detect_s = 30;
  int64_t hang_timeout_s = 300;  // restart.hang_timeout_s
  int64_t checkpoint_every_s = 300;
  double checkpoint_stall_s = 5;  // the steps stand still for it
  // A checkpoint written behind the steps (checkpoint.async) is complete this
  // long after its stall; a failure before then loses it too, and a stop (the
  // time limit, a handoff) writes its last one in place: stall + write. 0: the
  // write is the stall (in place), as in the scenario.
  int64_t checkpoint_write_s = 0;
  int64_t relaunch_s = 120;      // relaunch inside the allocation, to training again
  double queue_median_s = 3600;  // a new attempt's queue wait: lognormal
  double queue_sigma = 1.0;
  int64_t job_start_s = 300;     // a new allocation, to training again
  int64_t time_limit_s = 86400;  // the partition's; 0: none

  // Physics of a faulty node (assumption): the node an interruption points at
  // (node evidence, or the hung rank's) stays faulty; while it runs ranks it
  // fails the launch again after an exponential time of this mean.
  double repeat_mean_s = 4 * 3600;
  // The site's own health checks repair a faulty node this long after its
  // first failure, whatever the run does (without it nothing ever heals).
  int64_t site_repair_s = 86400;
};

struct Strategy {
  std::string key;                     // stable, for the JSON
  std::string label;                   // for people
  int spares = 0;                      // extra nodes per allocation, refilled only by a new attempt
  // restart.spare_pool_nodes: a standing Slurm job of the run's own, drawn
  // whole by a relaunch that finds too few healthy nodes, then refilled
  // (spare_pool.h); 0: none.
  int spare_pool_nodes = 0;
  bool quarantine = true;              // strike blamed nodes, exclude them at submission
  bool relaunch_in_allocation = true;  // restart.relaunch_in_allocation
  int backoff_s = 30;                  // restart.backoff_s
  int backoff_reset_s = 3600;          // restart.backoff_reset_s
  int max_restarts = 1000;             // restart.max_restarts (the spec's maximum)
  // Physics: a node comes back from its quarantine repaired (the brief's
  // "faulty until quarantined"); false: only the site repair heals it.
  bool quarantine_repairs = true;
  // Certified return (the controller's --certify-return, controller/core/
  // certify.h): a node whose quarantine expires stays excluded until a check
  // job on it passes; a failed check is a new strike, so the time out
  // doubles. Off in every row but its own: they model quarantine without it.
  bool certify_return = false;
  // Assumptions, not measured: the check finds a fault still there with this
  // probability, and runs this long on the node (not on the run's time).
  double certify_catch = 0.9;
  int certify_check_s = 600;
  // restart.continuation = "ahead" (false: "after"): while an attempt trains,
  // its continuation waits in Slurm's queue, eligible a lead before the time
  // limit, and takes over when it starts (controller/core/continuation.h).
  bool continuation_ahead = false;
  int continuation_lead_s = 0;  // restart.continuation_lead_s; 0: "auto"
  int signal_grace_s = 120;     // slurm.signal_grace_s (the spec's default)
  // checkpoint.every_steps = "auto": a checkpoint every Young's period on the
  // scenario's stall and the trace's interruption rate (what the controller's
  // failure history converges to), within the spec's default bounds; false:
  // the scenario's checkpoint_every_s.
  bool checkpoint_auto = false;
  // A change of the scenario's assumptions this row makes; empty for the
  // rows the brief asks for.
  std::string assumption_change;
  // For a mechanism's own row (no assumption changed): what it adds.
  std::string mechanism;
};

}  // namespace trellis::bench
