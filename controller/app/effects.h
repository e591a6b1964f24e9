#pragma once
// What a part of the controller decided, as a value. The parts (scheduler,
// launches, reconciler, run health) share the loop thread and own their
// state; none writes a transition, strikes a node or calls Slurm itself.
// Controller::Apply carries the effects out in a fixed order and logs every
// failure (docs/architecture.md, "The controller's parts").

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/spec/run_spec.h"
#include "controller/core/failure_class.h"
#include "controller/core/recovery.h"
#include "controller/core/run_state.h"

namespace trellis::controller {

class Store;
class SlurmClient;
struct Effects;

// A state change of a run, one SQLite transaction with `also`.
struct TransitionEffect {
  TransitionEffect(std::string run_id, RunState to, std::string reason,
                   std::string evidence_json = "{}",
                   std::function<absl::Status(Store&)> also = nullptr,
                   std::function<Effects(const absl::Status&)> then = nullptr)
      : run_id(std::move(run_id)),
        to(to),
        reason(std::move(reason)),
        evidence_json(std::move(evidence_json)),
        also(std::move(also)),
        then(std::move(then)) {}

  std::string run_id;
  RunState to;
  std::string reason;
  std::string evidence_json;
  std::function<absl::Status(Store&)> also;  // more writes in the same transaction
  // Told the outcome (to reply, or to undo what the transition would have
  // recorded); its effects are applied in turn.
  std::function<Effects(const absl::Status&)> then;
  // A second state change in the same transaction (an attempt's end and what
  // follows it), so that no stop can leave the run between the two.
  struct Next {
    RunState to;
    std::string reason;
    std::function<absl::Status(Store&)> also;
  };
  std::optional<Next> next;
};

// A write that is not a transition (a wait reason, a gate record).
struct StoreEffect {
  std::string what;  // for the log, when it fails
  std::function<absl::Status(Store&)> write;
};

// A strike against a node: quarantined (and drained where allowed).
struct StrikeEffect {
  std::string node;
  std::string reason;
  std::string evidence_json = "{}";
  std::string actor;
  bool until_released = false;
};

// An attempt that ended without success: the scheduler carries out what was
// decided (a new attempt after the backoff, or FAILED), or decides it by the
// restart budget when nobody could (the job ended unseen).
struct AttemptEndEffect {
  std::string run_id;
  int attempt = 0;
  int exit_code = 1;
  std::string why;
  std::string evidence_json = "{}";
  std::optional<RecoveryDecision> decided;
  std::optional<FailureClass> failure_class;  // of the launch, where one was classified
};

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

// A launch passed the gate: run health starts watching it.
struct LaunchStartedEffect {
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
};

// Run health found a launch that cannot go on: its workers' nodes lost, or a
// rank hung. The launch is stopped and the fault is its evidence.
struct LaunchFaultEffect {
  LaunchRef ref;
  std::vector<std::string> lost_nodes;
  std::map<std::string, double> lost_silent_s;
  std::optional<HangEvidence> hang;
};

// Runs on the Slurm thread (commands block); what it returns runs back on the
// loop and its effects are applied in turn.
using SlurmCall = std::function<std::function<Effects()>(SlurmClient&)>;

struct Effects {
  std::vector<StoreEffect> writes;
  std::vector<TransitionEffect> transitions;
  std::vector<std::pair<std::string, std::string>> aborted_runs;  // run id, why: end its launches
  std::vector<AttemptEndEffect> ended_attempts;
  std::vector<LaunchStartedEffect> started_launches;
  std::vector<LaunchRef> settled_launches;  // the batch script asked what follows
  std::vector<LaunchFaultEffect> faults;
  std::vector<StrikeEffect> strikes;
  std::vector<SlurmCall> slurm;
  std::vector<std::function<void()>> replies;  // last: after the state they report is stored
  bool schedule_now = false;

  Effects& operator+=(Effects&& o) {
    auto move_all = [](auto& to, auto& from) {
      for (auto& x : from) to.push_back(std::move(x));
    };
    move_all(writes, o.writes);
    move_all(transitions, o.transitions);
    move_all(aborted_runs, o.aborted_runs);
    move_all(ended_attempts, o.ended_attempts);
    move_all(started_launches, o.started_launches);
    move_all(settled_launches, o.settled_launches);
    move_all(faults, o.faults);
    move_all(strikes, o.strikes);
    move_all(slurm, o.slurm);
    move_all(replies, o.replies);
    schedule_now = schedule_now || o.schedule_now;
    return *this;
  }
  static Effects Reply(std::function<void()> r) {
    Effects e;
    e.replies.push_back(std::move(r));
    return e;
  }
};

// Runs `work` on the loop thread later and applies the effects it returns
// (for timers and other callbacks that arrive off the loop).
using Defer = std::function<void(std::function<Effects()> work)>;

}  // namespace trellis::controller
