#pragma once
// What a part of the controller decided, as plain values. The parts
// (scheduler, launches, reconciler, run health, allocations) share the loop
// thread, own their state and read the store through a StoreView; none writes
// the store or a file, calls Slurm, starts a timer or answers a caller itself. Each
// returns Effects, a list of commands, and the shell (Controller) carries them
// out from one queue in a fixed order, with no re-entry. What a command
// brings back (a Slurm answer, a timer firing, a created run) returns to the
// part that asked as a plain message (docs/architecture.md, "The
// controller's parts").

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "common/node_probe.h"
#include "common/spec/run_spec.h"
#include "controller/app/init_from.h"
#include "controller/app/replies.h"
#include "controller/app/slurm_commands.h"
#include "controller/app/views.h"
#include "controller/core/failure_class.h"
#include "controller/core/quarantine.h"
#include "controller/core/recovery.h"
#include "controller/core/run_state.h"
#include "controller/core/straggler.h"
#include "controller/core/slurm_facts.h"
#include "controller/store/records.h"

namespace trellis::controller {

// Which launch: (run, attempt, launch).
struct LaunchRef {
  std::string run_id;
  int attempt = 0;
  int launch = 0;
  bool operator<(const LaunchRef& o) const {
    return std::tie(run_id, attempt, launch) < std::tie(o.run_id, o.attempt, o.launch);
  }
  bool operator==(const LaunchRef& o) const {
    return run_id == o.run_id && attempt == o.attempt && launch == o.launch;
  }
};

// --- store writes: each one call of the store ---

struct SetWaitReason {
  std::string run_id;
  std::string reason;
};
struct RecordAttemptEnd {
  std::string run_id;
  int attempt = 0;
  int exit_code = 0;
  std::string reason;
  WallTime at;
};
struct SetRestartBackoff {
  std::string run_id;
  int restarts = 0;
  WallTime not_before;
};
struct RecordAttemptJob {
  std::string run_id;
  int attempt = 0;
  std::string job_id;
};
// The run's waiting attempt becomes its current one (AttemptRecord::waiting),
// eligible from `begin` where it was released sooner or later than its --begin
// (its queue wait counts from there).
struct TakeUpAttempt {
  std::string run_id;
  int attempt = 0;
  std::optional<WallTime> begin;
};
struct RecordAttemptNodes {
  std::string run_id;
  int attempt = 0;
  std::string nodes;
};
struct RecordAttemptLaunches {
  std::string run_id;
  int attempt = 0;
  int launches = 0;
};
struct RecordLaunch {
  LaunchRecord row;
};
struct RecordWorkerReport {
  WorkerReportRecord row;
};
struct RecordGate {
  std::string run_id;
  GateRecordRow row;
};
struct RecordHealthEvent {
  HealthEventRecord event;
};
struct RecordPoolJob {
  PoolJobRecord row;
};
// A node's newest certification check (NodeCertifier).
struct RecordNodeCheck {
  std::string node;
  NodeCheck check;
};
using StoreWrite =
    std::variant<SetWaitReason, RecordAttemptEnd, SetRestartBackoff, RecordAttemptJob,
                 TakeUpAttempt, RecordAttemptNodes, RecordAttemptLaunches, RecordLaunch, RecordWorkerReport,
                 RecordGate, RecordHealthEvent, RecordPoolJob, RecordNodeCheck>;

// A new run: its result goes to Scheduler::OnRunCreated as RunCreated.
struct CreateRun {
  std::string name;
  std::string user;
  std::string spec_toml;
  int nodes = 0;
  int ranks_per_node = 0;
  std::string run_dir_base;  // the run's directory is run_dir_base/<run id>
  ReplyTo<SubmitResult> reply;
  // The other run's checkpoint step it starts from (training.init_from):
  // linked into the new run's directory (init_from_link.h).
  std::optional<InitFromFound> init_from_source;
};
// The files an attempt's sbatch needs (its spec, secret and batch script),
// written before it is stored or submitted; the result goes to
// Scheduler::OnAttemptFilesWritten as AttemptFilesWritten.
struct WriteAttemptFiles {
  struct File {
    std::string path;
    std::string content;
    int mode = 0600;
  };
  std::string run_id;
  int attempt = 0;
  std::string dir;          // made first
  std::vector<File> files;  // each written atomically, in order
  // A resumed attempt keeps the secret file written before (a job submitted
  // before a stop may run with it): it must still hold this digest.
  std::string kept_secret_file;
  std::string kept_secret_sha256;
};
// A new attempt, written ahead of its sbatch: its result goes to
// Scheduler::OnAttemptCreated as AttemptCreated.
struct CreateAttempt {
  AttemptRecord record;
};

// A job Scheduler::SubmitAttempt stored in a transition: told whether the
// store took it (JobRecorded), so that a job the run can no longer use is
// not left behind.
struct SubmittedJob {
  std::string run_id;
  int attempt = 0;
  std::string job_id;
};

// A state change of a run, one SQLite transaction with its writes.
struct Transition {
  Transition() = default;
  Transition(std::string run_id, RunState to, std::string reason, std::string evidence_json = "{}",
             std::vector<StoreWrite> also = {})
      : run_id(std::move(run_id)),
        to(to),
        reason(std::move(reason)),
        evidence_json(std::move(evidence_json)),
        also(std::move(also)) {}

  std::string run_id;
  RunState to{};
  std::string reason;
  std::string evidence_json = "{}";
  std::vector<StoreWrite> also;  // more writes in the same transaction
  // A second state change in the same transaction (an attempt's end and what
  // follows it), so that no stop can leave the run between the two.
  struct Next {
    RunState to;
    std::string reason;
    std::vector<StoreWrite> also;
  };
  std::optional<Next> next;
  // Answered with the state reached, or why the store refused it.
  std::optional<ReplyTo<RunState>> reply;
  std::optional<SubmittedJob> records_job;
};

// --- the parts' own messages, routed by the shell ---

// The run's launches end (its job ended or it was cancelled): waiting
// workers get ABORT, run health stops watching them.
struct EndLaunchesOfRun {
  std::string run_id;
  std::string why;
  // Only this attempt's: one waiting ahead is not ended with it. None: all.
  std::optional<int> attempt{};
};

// An attempt that ended without success: the scheduler carries out what was
// decided (a new attempt after the backoff, or FAILED), or decides it by the
// restart budget when nobody could (the job ended unseen).
struct AttemptEnded {
  std::string run_id;
  int attempt = 0;
  int exit_code = 1;
  std::string why;
  std::string evidence_json = "{}";
  std::optional<RecoveryDecision> decided;
  std::optional<FailureClass> failure_class;  // of the launch, where one was classified
};

// A launch passed the gate: run health starts watching it.
struct WatchLaunch {
  LaunchRef ref;
  std::vector<std::string> rank_nodes;  // the node of each global rank
  bool model = false;                   // [model] ranks report steps from the start
  spec::RestartSection restart;
  spec::HealthSection health;
  // GO node -> host:port of its worker's /metrics, where the worker sent one.
  std::map<std::string, std::string> metrics_addresses;
  // Started before a controller restart and watched again since
  // (launch_resume.cc), with what its stored final reports say: the nodes
  // whose workers finished, and the ranks that ended.
  bool resumed = false;
  std::set<std::string> finished_nodes;
  std::set<int> ended_ranks;
  // The ranks whose straggler episodes had not ended before the restart:
  // they may go on, and are not raised again (StragglerWindow::HoldEpisode).
  std::set<int> straggler_ranks;
  // What GO told the ranks of their nodes' failures (TRELLIS_MTBF_S), and
  // how it was found: checkpoint.every_steps = "auto" chooses with it.
  double mtbf_s = 0;
  std::string mtbf_basis;
};

// Continuations (continuation.h): the run's next attempt is to wait ahead,
// eligible in `begin_in` (Scheduler::QueueAhead).
struct QueueAheadOf {
  std::string run_id;
  std::chrono::seconds begin_in{0};
  std::string why;  // when, and how the lead was chosen
};
// The run's attempt that waited ahead is its current one now: the gate
// decides on the workers it held (LaunchGate::TakenUp).
struct AttemptTakenUp {
  std::string run_id;
  int attempt = 0;
};

// The batch script asked what follows the launch: no longer watched.
struct UnwatchLaunch {
  LaunchRef ref;
};

// Run health found a launch that cannot go on: its workers' nodes lost, or a
// rank hung. Launches stops it and keeps the fault as its evidence.
struct LaunchFault {
  LaunchRef ref;
  std::vector<std::string> lost_nodes;
  std::map<std::string, double> lost_silent_s;
  std::optional<HangEvidence> hang;
};

// A worker's step spool to store (controller/app/step_spools.h): its final
// report said it exited with records not stored.
struct StoreStepSpool {
  std::string run_id;
  int attempt = 0;
  int launch = 0;
  std::string node;
};

// A damaged checkpoint step renamed out of the run's checkpoint directory
// (common/checkpoint_layout.h), before the run goes on from an older one.
struct SetAsideCheckpoint {
  std::string run_id;
  std::string checkpoint_dir;
  int64_t step = 0;
};

// A strike against a node: quarantined (and drained where allowed).
struct StrikeNode {
  std::string node;
  std::string reason;
  std::string evidence_json = "{}";
  std::string actor;
  bool until_released = false;
};

// Allocations' answer on a worker's node (Allocations::Check): the shell
// carries on with what it held under `ticket`.
struct NodeChecked {
  uint64_t ticket = 0;
  absl::Status status;
};

// --- Slurm calls (slurm_commands.h): run on the Slurm thread, answered on the loop ---

// --- timers: fire as TimerFired to the part that started them ---

struct TimerKey {
  enum Kind { kGateTimeout, kStopGrace, kHealthCheck } kind = kHealthCheck;
  LaunchRef ref;  // none for kHealthCheck
  bool operator<(const TimerKey& o) const {
    return std::tie(kind, ref) < std::tie(o.kind, o.ref);
  }
  bool operator==(const TimerKey& o) const { return kind == o.kind && ref == o.ref; }
};
struct StartTimer {
  TimerKey key;
  std::chrono::nanoseconds after{0};
};
struct CancelTimer {
  TimerKey key;
};

// --- metric updates (controller/app/metrics.h) ---

struct CountRunQueued {};
struct CountRestart {
  std::string run_id;
  std::optional<FailureClass> failure_class;
  bool relaunch = false;
};
struct CountGateDecided {
  std::string run_id;
  bool go = false;
  std::map<std::string, NodeProbe> probes;
};
struct CountStraggler {
  std::string run_id;
};
struct CountStepComplete {
  std::string run_id;
  StepSpread spread;
  int64_t tokens = 0;
};
// The hang timeout in force for the run's running launch (hang_timeout.h).
struct CountHangTimeout {
  std::string run_id;
  double seconds = 0;
};

// The queue's runs are looked at now, not at the next tick.
struct ScheduleNow {};

using Command =
    std::variant<StoreWrite, CreateRun, WriteAttemptFiles, CreateAttempt, Transition,
                 EndLaunchesOfRun, NodeChecked, AttemptEnded, QueueAheadOf, AttemptTakenUp,
                 WatchLaunch, UnwatchLaunch,
                 LaunchFault, StrikeNode, SetAsideCheckpoint, StoreStepSpool, ListUsableNodes, SubmitJob, CancelJob, CancelRunJob,
                 ReleaseJob, SignalStep, QueryJobs, ShowJob, DrainNode, StartTimer, CancelTimer,
                 CountRunQueued, CountRestart, CountGateDecided, CountStraggler,
                 CountStepComplete, CountHangTimeout, SendReply, ScheduleNow>;

struct Effects {
  std::vector<Command> commands;

  Effects() = default;
  template <typename C, typename = std::enable_if_t<!std::is_same_v<std::decay_t<C>, Effects>>>
  Effects(C command) {  // NOLINT: one command is an Effects
    Add(std::move(command));
  }
  template <typename C>
  Effects& Add(C command) {
    if constexpr (std::is_constructible_v<StoreWrite, C> && !std::is_same_v<C, StoreWrite>)
      commands.emplace_back(StoreWrite(std::move(command)));
    else
      commands.emplace_back(std::move(command));
    return *this;
  }
  Effects& operator+=(Effects&& o) {
    for (auto& c : o.commands) commands.push_back(std::move(c));
    return *this;
  }
  bool empty() const { return commands.empty(); }
  // The commands of kind C, in order (store writes by their own kind).
  template <typename C>
  std::vector<const C*> All() const {
    std::vector<const C*> out;
    for (const Command& c : commands) {
      if constexpr (std::is_constructible_v<StoreWrite, C> && !std::is_same_v<C, StoreWrite>) {
        if (const auto* w = std::get_if<StoreWrite>(&c))
          if (const C* x = std::get_if<C>(w)) out.push_back(x);
      } else {
        if (const C* x = std::get_if<C>(&c)) out.push_back(x);
      }
    }
    return out;
  }
};

// --- what comes back to the parts ---

struct RunCreated {
  ReplyTo<SubmitResult> reply;
  absl::StatusOr<RunRecord> run;
};
struct AttemptFilesWritten {
  std::string run_id;
  int attempt = 0;
  absl::Status status;  // FAILED_PRECONDITION: the kept secret is gone or altered
};
struct AttemptCreated {
  std::string run_id;
  int attempt = 0;
  absl::Status status;
};
struct JobRecorded {
  SubmittedJob job;
  absl::Status status;
};
// The Slurm calls' answers: slurm_commands.h.

}  // namespace trellis::controller
