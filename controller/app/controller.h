#pragma once
// The controller's imperative shell: one Boost.Asio loop thread owns the
// store and the parts (scheduler, launches, reconciler, run health,
// allocations), which read a StoreView, decide and return Effects; Apply()
// carries their commands out from one queue (controller_apply.cc). Slurm
// commands run on a separate thread and post their answers back. Public methods may be
// called from any thread (gRPC reactors); replies are delivered on the loop
// thread. See docs/architecture.md, "The controller's parts".

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <boost/asio.hpp>
#include <memory>
#include <thread>

#include "common/clock.h"
#include "common/loop_timer.h"
#include "controller/app/allocations.h"
#include "controller/app/continuations.h"
#include "controller/app/effects.h"
#include "controller/app/ingest_metrics.h"
#include "controller/app/ingester.h"
#include "controller/app/launches.h"
#include "controller/app/loop_context.h"
#include "controller/app/metrics.h"
#include "controller/app/node_certifier.h"
#include "controller/app/notifier.h"
#include "controller/app/reconciler.h"
#include "controller/app/run_health.h"
#include "controller/app/scheduler.h"
#include "controller/app/scrape_targets.h"
#include "controller/app/slurm_calls.h"
#include "controller/app/spare_pools.h"
#include "controller/app/step_spools.h"
#include "controller/app/store_view.h"
#include "controller/app/views.h"
#include "controller/app/waiting_replies.h"
#include "controller/app/watchers.h"
#include "controller/slurm/slurm_client.h"
#include "controller/store/store.h"

namespace trellis::controller {

class Controller {
 public:
  Controller(ControllerConfig config, std::unique_ptr<Store> store,
             std::shared_ptr<SlurmClient> slurm, Clock* clock);
  ~Controller();

  // Starts the step pipeline's thread (its own store connection: the error
  // when it cannot open), reconciles with Slurm once, then starts the loop
  // and its timers.
  absl::Status Start();
  // Ends watch streams and answers waiting registrations (workers retry), so
  // the gRPC server can shut down; the loop keeps running until Stop().
  void BeginShutdown();
  void Stop();
  boost::asio::io_context& io() { return io_; }
  Clock& clock() { return *clock_; }
  // Known only once the server is bound (port 0 in tests); call before Start().
  void SetAdvertiseAddress(std::string addr) { config_.advertise_addr = std::move(addr); }
  void SetControllerFile(std::string path) { config_.controller_file = std::move(path); }
  // For any thread: registry() to serve, and the Observe* durations.
  Metrics& metrics() { return metrics_; }

  // --- users ---
  void SubmitRun(std::string spec_toml, bool dry_run, std::string user, Reply<SubmitResult> reply);
  void GetRun(std::string run_id, Reply<RunView> reply, RanksQuery ranks = {});
  // `user` empty: everyone's runs.
  void ListRuns(int limit, bool active_only, std::string user,
                Reply<std::vector<RunView>> reply);
  void CancelRun(std::string run_id, std::string reason, Reply<RunState> reply);
  // Replies with the snapshot; the sink then gets every change until OnEnd.
  void Watch(std::string run_id, WatchSink* sink, Reply<RunView> reply);
  // `done` runs on the loop once the sink will never be called again.
  void Unwatch(std::string run_id, WatchSink* sink, std::function<void()> done);
  // `trellis report`'s step history: at most `max_points` (>= 1) points
  // (ReadStepSeries, controller/store/store.h); NOT_FOUND for an unknown run.
  void RunSteps(std::string run_id, int max_points, Reply<StepSeries> reply);

  // --- nodes (controller_nodes.cc) ---
  void ListNodes(Reply<std::vector<NodeStatusView>> reply);
  void QuarantineNode(std::string node, std::string reason, std::string actor,
                      Reply<NodeStatusView> reply);
  // `forget`: the entry and its strikes go (it comes back as never struck).
  void ReleaseNode(std::string node, bool forget, Reply<NodeStatusView> reply);
  void GateReport(std::string run_id, int attempt, Reply<GateReportView> reply);

  // --- workers ---
  // `hostname` is what rank 0's node is reached by (MASTER_ADDR);
  // `metrics_addr` the host:port of the worker's /metrics, or empty.
  void Register(WorkerId id, std::string version, std::string hostname, NodeProbe probe,
                SlurmStep step, std::string metrics_addr, Reply<GateAnswer> reply);
  void AuthenticateWorker(WorkerId id, Reply<bool> reply);
  // A batch of step records that passed CheckBatch, for the step pipeline;
  // `done` runs on its thread once the batch is stored or found stored
  // before. False: not taken (the pipeline is full or stopped), `done` dropped.
  bool SubmitSteps(StepBatch batch, Ingester::Done done);
  IngestMetrics& ingest_metrics() { return ingest_metrics_; }
  // A worker's heartbeat: it is alive (any report counts the same).
  // `stopping`: the worker is stopping its ranks or passed a stop on.
  // `rank_states`: each live rank's process state (RunHealth::RankStates).
  void Heartbeat(WorkerId id, bool stopping, std::map<int, char> rank_states = {});
  void RecordRankExit(WorkerId id, RankExitInfo exit);
  // `oom_kills`: how many processes the kernel's OOM killer ended in the job's
  // cgroup on that node during the launch; -1 unknown.
  // `time_limit_warned`: the worker passed Slurm's wall-time warning on to
  // its ranks (a planned stop: the run continues in a new attempt).
  void ReportExit(WorkerId id, WorkerReport report, Reply<bool> reply);
  void NextLaunch(WorkerId id, NextLaunchQuestion question, Reply<NextLaunchAnswer> reply);
  // A spare pool node's standby worker (SparePools::StandBy), its node checked
  // against its pool job's allocation.
  void StandBy(StandbyCall call, Reply<StandbyAnswer> reply);

 private:
  // controller_apply.cc: the queue. Each command kind has a rank, and the
  // queue applies the lowest-ranked command first, in arrival order within a
  // rank: metric updates, store writes, transitions, ended launches, ended
  // attempts, launches watched and unwatched, faults, strikes, Slurm calls
  // and timers, replies (after the state they report is stored), and a
  // schedule tick last. What a command brings back from a part joins the
  // queue; Apply never calls itself. Every failure is logged.
  void Apply(Effects fx);
  void Enqueue(Effects fx);
  void Carry(Command command);
  void Write(const StoreWrite& write);
  absl::Status ApplyTransition(const Transition& t);
  void StartPartTimer(const TimerKey& key, std::chrono::nanoseconds after);
  void CancelPartTimer(const TimerKey& key);
  void CancelAllTimers();
  void RunOnSlurm(Command call);
  // An answer from the Slurm thread, to the part that asked.
  void Route(SlurmAnswer answer);
  // controller_nodes.cc
  void ApplyStrike(const StrikeNode& s);
  void CountQuarantined();
  // The certifier's tick with the result files of its checks in flight.
  Effects CertifyTick();
  // The live spare pool jobs' nodes by state, every reconciliation tick.
  void CountSparePools();
  // Rewrites the service-discovery file when its targets changed.
  void FlushTargets();
  // Applies `then` told whether the worker may act: its attempt's secret,
  // then its node against the job's allocation (Allocations::Check, answered
  // as NodeChecked; `fresh` asks Slurm again). Loop thread.
  using WorkerCheck = std::function<Effects(absl::Status)>;
  void AsWorker(const WorkerId& id, bool fresh, WorkerCheck then);
  // A requeue question with the allocation's nodes as Slurm gave them (the
  // batch script's report is not trusted); other questions as they came.
  NextLaunchQuestion WithSlurmsNodes(const WorkerId& id, const NextLaunchQuestion& q);
  // What the step pipeline stored (posted to the loop): run health sees each
  // record, watchers each step every rank has reported.
  void StepsStored(std::vector<StepBatch> batches, std::vector<StoredStep> rows);
  // `goodput`: with the run's goodput to now (a few more reads).
  absl::StatusOr<RunView> BuildView(const RunRecord& run, int steps, bool goodput = false);
  absl::StatusOr<Goodput> GoodputOf(const std::string& run_id,
                                    const std::vector<EventRecord>& events);
  // Recomputes a live run's goodput series (at its transitions and every
  // reconciliation); failures are logged.
  void ExportGoodput(const std::string& run_id);
  void ExportGoodputOfLiveRuns();
  // The step spools left in recent runs' directories (step_spools.h), at start.
  void ScanStepSpools();
  // Applies `tick` every `every` on the clock, until BeginShutdown.
  void ArmTick(LoopTimer& timer, std::chrono::milliseconds every, std::function<Effects()> tick);

  ControllerConfig config_;
  Metrics metrics_;
  IngestMetrics ingest_metrics_;
  std::unique_ptr<Store> store_;
  StoreReader store_view_;
  std::shared_ptr<SlurmClient> slurm_;
  Clock* clock_;
  LoopContext ctx_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  boost::asio::thread_pool slurm_pool_{1};
  // The schedule and reconcile ticks, on the clock (a FakeClock drives them in tests).
  LoopTimer schedule_timer_;
  LoopTimer reconcile_timer_;
  std::thread loop_thread_;
  Watchers watchers_;
  Scheduler scheduler_;
  Launches launches_;
  Allocations allocations_;
  Reconciler reconciler_;
  Continuations continuations_;
  SparePools spare_pools_;
  NodeCertifier certifier_;
  RunHealth health_;
  ScrapeTargets targets_;
  std::unique_ptr<Ingester> ingester_;  // made by Start
  StepSpools spools_;
  WaitingReplies replies_;
  Notifier notifier_;
  // The newest wait reason streamed to each run's watchers, its digits left
  // out (controller_apply.cc, Write).
  std::map<std::string, std::string> wait_reasons_said_;
  // What each worker call does once Allocations has checked its node.
  std::map<uint64_t, WorkerCheck> node_checks_;
  uint64_t next_node_check_ = 1;
  // The queue of commands by rank (controller_apply.cc), and whether it is
  // being applied now.
  std::vector<std::deque<Command>> queue_;
  bool applying_ = false;
  // The parts' timers running on the clock; `generation` tells a timer that
  // fired after it was cancelled or started again.
  struct RunningTimer {
    TimerId id = 0;
    uint64_t generation = 0;
  };
  std::map<TimerKey, RunningTimer> timers_;
  uint64_t timer_generation_ = 0;
  bool stopped_ = false;  // loop thread only
  std::atomic<bool> shutdown_begun_{false};
};

}  // namespace trellis::controller
