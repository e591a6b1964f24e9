#pragma once
// Run health: what the workers and ranks report while a launch runs. Keeps
// every rank's latest step record (memory only; the step pipeline stores
// them, docs/architecture.md), and watches each running launch: a worker silent
// for restart.heartbeat_timeout_s is a lost node, a rank with no new step for
// restart.hang_timeout_s (startup_timeout_s before its first) hangs, a rank
// slower than the others is a straggler. A part of the controller
// (docs/architecture.md, "The controller's parts"): loop thread only, reads a
// StoreView, returns Effects; its check runs when its timer (kHealthCheck)
// fires.

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/step_record.h"
#include "controller/app/effects.h"
#include "controller/app/loop_context.h"
#include "controller/app/views.h"
#include "controller/core/hang_timeout.h"
#include "controller/core/progress.h"
#include "controller/core/rank_latest.h"
#include "controller/core/straggler.h"

namespace trellis::controller {

class RunHealth {
 public:
  // How often running launches are checked for lost workers and hangs.
  static constexpr std::chrono::seconds kCheckEvery{1};
  // After a controller restart, no worker of a resumed launch is taken for
  // lost before this: its channel reconnects within 5 s (the worker's
  // reconnect backoff), and its next heartbeat follows within 5 s more.
  static constexpr std::chrono::seconds kReconnectGrace{15};

  explicit RunHealth(LoopContext ctx) : ctx_(ctx) {}

  // A stored rank record (the step pipeline stored it): kept as the rank's
  // latest, and watched for progress and stragglers.
  Effects ObserveStep(const WorkerId& id, int rank, const StepRecord& record);
  // A step's summary row as a commit left it: a step every rank reported
  // sets the run's step figures.
  Effects StepStored(const std::string& run_id, const StepRow& row);
  // A report of any kind from a worker (heartbeats, steps, exits).
  void Heard(const WorkerId& id);
  // A rank ended: it steps no more, and is not judged for a hang.
  void RankEnded(const WorkerId& id, int rank);
  // The worker is stopping its ranks or passed a stop on (they may write a
  // last checkpoint): the launch's hang timeout is the spec's again.
  void Stopping(const WorkerId& id);
  // The worker read its ranks' process states ('T' stopped, 'D' in the
  // kernel): a hang's verdict names a rank held so (progress.h).
  void RankStates(const WorkerId& id, const std::map<int, char>& states);
  // The hang timeout in force for the run's newest watched launch, if any.
  std::optional<TimeoutInForce> HangTimeoutOf(const std::string& run_id) const;
  // The worker's final report: its node is done with the launch (silent,
  // not lost), and so are its ranks, while other nodes may run on.
  void Finished(const WorkerId& id);
  // Starts watching the launch (and the check timer, if it was not running).
  Effects Start(const WatchLaunch& started);
  void End(const LaunchRef& ref);
  // The run's launches are no longer watched (its job ended).
  void StopWatching(const std::string& run_id);
  // ... and its ranks' latest records are kept as they are.
  void RunEnded(const std::string& run_id);
  // The check timer fired: lost workers and hangs are looked for, and the
  // timer started again while launches are watched.
  Effects CheckDue();
  std::optional<RankLatestPage> RanksPage(const std::string& run_id, int from, int limit) const {
    return rank_latest_.Page(run_id, from, limit);
  }

 private:
  struct Watch {
    WatchLaunch launch;
    SteadyTime started;
    SteadyTime judge_lost_from;  // resumed: kReconnectGrace after the restart
    // node -> last report, for the nodes whose workers have not sent their
    // final report: a finished worker is silent, not lost.
    std::map<std::string, SteadyTime> last_heard;
    std::set<std::string> go_nodes;
    std::set<std::string> finished_nodes;
    std::vector<RankProgress> ranks;               // by global rank
    std::set<int> ended_ranks;                     // not judged for a hang
    std::unique_ptr<StragglerWindow> stragglers;
    // The newest step every rank reported, until its summary row is stored.
    std::optional<StepSpread> completed;
    bool faulted = false;  // reported once; the launch is being stopped
    // checkpoint.every_steps = "auto"'s last interval said in an event (0: none yet).
    int64_t checkpoint_every_said = 0;
    // Learned hang timeouts (hang_timeout.h; run_health_timeouts.cc).
    HangTimeoutPolicy timeouts;
    StepGaps gaps;
    int64_t newest_step = -1;  // the launch's newest step any rank reported, and when
    SteadyTime newest_at;
    std::vector<std::optional<int64_t>> next_checkpoint;  // by rank, its last record's
    std::vector<double> earlier_starts_s;  // the run's earlier launches' starts
    bool stopping = false;
    bool start_said = false;
    TimeoutInForce in_force;      // the longest of its running ranks', at the last check
    double in_force_exported = -1;
  };
  void KeepLatest(const WorkerId& id, int rank, const StepRecord& record);
  // run_health_timeouts.cc: a rank's new step (before `p` moves to it), the
  // watch's timeouts at its start, and each running rank's at a check.
  Effects NoteNewStep(Watch& w, const RankProgress& p, const StepRecord& record);
  void LearnStartups(Watch& w);
  Effects ApplyTimeouts(Watch& w, std::vector<RankProgress>* running);
  // What `p` is held to; nullopt: FindHang's own (a generic command's rank
  // before its first step is never judged).
  std::optional<TimeoutInForce> RankTimeout(const Watch& w, const RankProgress& p) const;
  Effects Check();
  Effects ArmCheck();
  HealthEventRecord CheckpointIntervalEvent(const Watch& w, const std::string& node,
                                            const StepRecord& r) const;
  HealthEventRecord Event(const Watch& w, std::string kind, int rank, std::string node,
                          std::string detail, std::string detail_json) const;

  LoopContext ctx_;
  // The latest step record of every rank, per run (memory only; see
  // docs/architecture.md, "Store").
  RankLatestTable rank_latest_;
  std::map<LaunchRef, Watch> watches_;
  bool check_armed_ = false;
};

}  // namespace trellis::controller
