#pragma once
// Rows of the controller's SQLite store, as plain values.

#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "controller/core/run_state.h"
#include "controller/core/spare_pool.h"  // PoolJobRecord

namespace trellis::controller {

struct RunRecord {
  int64_t seq = 0;
  std::string run_id;  // "<name>-<seq>"
  std::string name;
  std::string user;
  std::string spec_toml;
  std::string run_dir;
  RunState state = RunState::kQueued;
  std::string state_reason;
  int nodes = 0;
  int ranks_per_node = 0;
  int restarts = 0;
  WallTime not_before;  // restart backoff
  WallTime created;
  WallTime updated;
};

struct AttemptRecord {
  std::string run_id;
  int attempt = 0;
  std::string slurm_job_id;
  int launches = 0;
  std::vector<std::string> sbatch_args;
  std::string nodelist;
  std::string secret_sha256;  // of the attempt's secret (the clear one is in its 0600 file)
  std::optional<int> exit_code;
  std::string end_reason;
  WallTime submitted;
  std::optional<WallTime> ended;
  // Submitted ahead (restart.continuation = "ahead"): the run's next attempt,
  // queued while the current one trains, until the run takes it up (a
  // handoff, or a continuation or new attempt needed sooner). Never the
  // run's current attempt while it waits.
  bool waiting = false;
  std::optional<WallTime> begin;  // --begin: when Slurm may start it
  bool live() const { return !ended.has_value(); }
};

// The run's attempt waiting ahead (live, not yet taken up), if any.
inline std::optional<AttemptRecord> WaitingAttemptOf(const std::vector<AttemptRecord>& attempts) {
  for (auto it = attempts.rbegin(); it != attempts.rend(); ++it)
    if (it->waiting && it->live()) return *it;
  return std::nullopt;
}
// The number a new attempt takes: past every one stored, waiting or ended.
inline int NextAttemptNumber(const std::vector<AttemptRecord>& attempts) {
  int most = 0;
  for (const auto& a : attempts) most = a.attempt > most ? a.attempt : most;
  return most + 1;
}

struct EventRecord {
  WallTime time;
  RunState from;
  RunState to;
  std::string reason;
  std::string evidence_json;
};

struct GateRecordRow {
  int attempt = 0;
  int launch = 0;
  WallTime time;
  std::string decision;  // "GO" or "ABORT"
  std::string reason;
  std::string policy_json;
  std::string nodes_json;  // [{node, decision, reasons, score, probe}]
};

// One launch (srun step) of an attempt: recorded at GO, completed when it ends.
struct LaunchRecord {
  std::string run_id;
  int attempt = 0;
  int launch = 0;
  std::string nodes;  // the nodes that ran ranks, in rank order
  WallTime started;
  std::optional<WallTime> ended;
  std::string failure_class;  // FailureClassName(); "succeeded" when it did
  std::optional<int> exit_code;
  std::string reason;
  std::string blamed_node;  // empty: no node blamed
  std::string evidence_json = "{}";
  std::string recovery;  // what followed: "relaunch", "new_attempt", "fail", "succeed"
  // What the gate's GO told every node, and what resuming the launch needs
  // (GoRecordToJson, controller/app/launch_answers.h);
  // written once, at GO: a later PutLaunch with "" keeps it.
  std::string go_json;
  // recovery "relaunch": the nodes the next launch was announced on, in order.
  std::string next_nodes;
};

// A worker's final report on its launch, kept so that a controller started
// again knows which nodes finished before it (controller/app/launch_resume.cc).
struct WorkerReportRecord {
  std::string run_id;
  int attempt = 0;
  int launch = 0;
  std::string node;
  WallTime time;
  int exit_code = 0;
  std::string reason;
  int oom_kills = -1;  // -1: not measured
  bool time_limit_warned = false;
  std::string ranks_json = "[]";  // its ranks' ends (controller/app/worker_reports.h)
};

// Spare pools: submitted, standing, drawn, ended.
inline constexpr char kSparePoolEvent[] = "spare_pool";

// The kinds of health event that restarts of the controller read back: a
// straggler episode begins (a strike with straggler_strike) and ends.
inline constexpr char kStragglerEvent[] = "straggler";
inline constexpr char kStragglerEndedEvent[] = "straggler_ended";
// Continuations ahead (launch_handoff.cc): queued, handed over, given up.
inline constexpr char kContinuationEvent[] = "continuation";
// checkpoint.every_steps = "auto" chose an interval (RunHealth).
inline constexpr char kCheckpointIntervalEvent[] = "checkpoint_interval";
// Every rank of a launch stepped: how long its start took (RunHealth; the
// run's later launches learn their start-up timeout from it).
inline constexpr char kLaunchStartedEvent[] = "started";

// Something noticed about a running launch that is not a state change.
struct HealthEventRecord {
  std::string run_id;
  int attempt = 0;
  int launch = 0;
  WallTime time;
  std::string kind;  // "straggler", "straggler_ended", "hang", "node_lost"
  int rank = -1;
  std::string node;
  std::string detail;  // one line for people
  std::string detail_json = "{}";
};

struct StepRow {
  int attempt = 0;
  int launch = 0;
  int64_t step = 0;
  int ranks = 0;
  double loss_sum = 0;
  int64_t tokens = 0;
  double step_seconds_max = 0;
  std::string last_json;  // the latest rank record of this step
};

}  // namespace trellis::controller
