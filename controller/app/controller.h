#pragma once
// The controller's imperative shell: one Boost.Asio loop thread owns the
// store and all in-memory state; Slurm commands run on a separate thread and
// post their results back. Public methods may be called from any thread
// (gRPC reactors); replies are delivered on the loop thread.

#include <atomic>
#include <boost/asio.hpp>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "common/clock.h"
#include "common/spec/run_spec.h"
#include "controller/app/views.h"
#include "controller/app/watchers.h"
#include "controller/core/decisions.h"
#include "controller/core/quarantine.h"
#include "controller/slurm/slurm_client.h"
#include "controller/store/store.h"

namespace trellis::controller {

struct ControllerConfig {
  std::string output_root;     // absolute; every run directory lives under it
  std::string worker_bin;      // absolute path of trellis-worker on compute nodes
  std::string advertise_addr;  // host:port workers dial
  std::string sbatch_template;
  std::string default_partition;
  std::chrono::milliseconds schedule_interval{1000};
  std::chrono::milliseconds reconcile_interval{5000};
  int master_port = 29500;
  QuarantineConfig quarantine;
  bool can_drain = false;  // also `scontrol update state=drain` quarantined nodes
};

class Controller {
 public:
  Controller(ControllerConfig config, std::unique_ptr<Store> store,
             std::shared_ptr<SlurmClient> slurm, const Clock* clock);
  ~Controller();

  // Reconciles with Slurm once, then starts the loop and its timers.
  void Start();
  // Ends watch streams and answers waiting registrations (workers retry), so
  // the gRPC server can shut down; the loop keeps running until Stop().
  void BeginShutdown();
  void Stop();
  boost::asio::io_context& io() { return io_; }
  // Known only once the server is bound (port 0 in tests); call before Start().
  void SetAdvertiseAddress(std::string addr) { config_.advertise_addr = std::move(addr); }

  // --- users ---
  void SubmitRun(std::string spec_toml, bool dry_run, std::string user, Reply<SubmitResult> reply);
  void GetRun(std::string run_id, Reply<RunView> reply, RanksQuery ranks = {});
  void ListRuns(int limit, bool active_only, Reply<std::vector<RunView>> reply);
  void CancelRun(std::string run_id, std::string reason, Reply<RunState> reply);
  // Replies with the snapshot; the sink then gets every change until OnEnd.
  void Watch(std::string run_id, WatchSink* sink, Reply<RunView> reply);
  // `done` runs on the loop once the sink will never be called again.
  void Unwatch(std::string run_id, WatchSink* sink, std::function<void()> done);

  // --- nodes (controller_nodes.cc) ---
  void ListNodes(Reply<std::vector<NodeStatusView>> reply);
  void QuarantineNode(std::string node, std::string reason, std::string actor,
                      Reply<NodeStatusView> reply);
  void ReleaseNode(std::string node, Reply<NodeStatusView> reply);
  void GateReport(std::string run_id, int attempt, Reply<GateReportView> reply);

  // --- workers ---
  // `hostname` is what rank 0's node is reached by (MASTER_ADDR).
  void Register(WorkerId id, std::string version, std::string hostname, NodeProbeFigures probe,
                Reply<GateAnswer> reply);
  void AuthenticateWorker(WorkerId id, Reply<bool> reply);
  // Summarized per step in the store, and kept as the rank's latest record.
  void RecordStep(WorkerId id, int rank, StepRecord record);
  void RecordRankExit(WorkerId id, RankExitInfo exit);
  void ReportExit(WorkerId id, std::vector<RankExitInfo> exits, int exit_code, std::string reason,
                  Reply<bool> reply);
  void NextLaunch(WorkerId id, int step_exit_code, Reply<NextLaunchAnswer> reply);

 private:
  // One launch of the workers inside an attempt, while it is being gated or runs.
  struct PendingRegistration {
    std::string node;
    Reply<GateAnswer> reply;
  };
  struct LaunchState {
    std::string run_id;
    int attempt = 0;
    int launch = 0;
    int expected_nodes = 0;
    int needed_nodes = 0;
    int ranks_per_node = 0;
    GatePolicy policy;
    std::vector<NodeVerdict> registered;  // in registration order
    std::map<std::string, NodeProbeFigures> probes;
    std::map<std::string, std::string> hostnames;
    std::string secret;  // the attempt's, cached for the registrations after the first
    std::vector<PendingRegistration> waiting;
    std::optional<GateOutcome> outcome;
    std::map<std::string, bool> reported;  // node -> ReportExit received
    std::vector<RankExitInfo> rank_exits;
    std::unique_ptr<boost::asio::steady_timer> gate_timer;
  };
  using LaunchKey = std::tuple<std::string, int, int>;

  // controller_runs.cc
  absl::StatusOr<spec::RunSpec> ParseStoredSpec(const RunRecord& run);
  std::string RunDirFor(const spec::RunSpec& spec, const std::string& run_id) const;
  absl::StatusOr<RunView> BuildView(const RunRecord& run, int steps);
  absl::Status Transition(const std::string& run_id, RunState to, const std::string& reason,
                          const std::string& evidence_json = "{}",
                          const std::function<absl::Status(Store&)>& also = nullptr);
  void ScheduleTick();
  void OnEligibility(std::vector<RunRecord> queued,
                     std::map<std::string, absl::StatusOr<std::vector<std::string>>> usable);
  void SubmitAttempt(const RunRecord& run, const spec::RunSpec& spec,
                     const std::vector<std::string>& excluded);
  void OnSubmitted(std::string run_id, int attempt, std::vector<std::string> args,
                   std::string secret, absl::StatusOr<std::string> job_id);
  void FailAttempt(const std::string& run_id, int attempt, int exit_code, const std::string& why,
                   const std::string& evidence_json);
  void FinishCancel(const std::string& run_id, const std::string& reason, Reply<RunState> reply);

  // controller_agents.cc
  absl::StatusOr<AttemptRecord> CheckWorker(const WorkerId& id);
  LaunchState* FindOrCreateLaunch(const WorkerId& id, const RunRecord& run,
                                  const spec::RunSpec& spec);
  void EvaluateGate(LaunchState* launch, bool timed_out);
  void AnswerWaiting(LaunchState* launch);
  void AbortLaunches(const std::string& run_id, const std::string& reason);
  void RecordGate(LaunchState* launch, const GateOutcome& out);
  void KeepRankLatest(const WorkerId& id, int rank, const StepRecord& record);

  // controller_nodes.cc
  // A strike against a node: quarantined (and drained where allowed).
  void StrikeNode(const std::string& node, const std::string& reason,
                  const std::string& evidence_json, const std::string& actor, bool until_released);
  std::vector<std::string> ExcludedNow();

  // controller_reconcile.cc
  void ReconcileTick(bool startup);
  void OnSlurmSnapshot(absl::StatusOr<std::vector<SlurmJob>> listed,
                       std::map<std::string, absl::StatusOr<std::optional<SlurmJob>>> shown,
                       bool startup);
  void SettleEndedAttempt(const RunRecord& run, const AttemptRecord& attempt,
                          const Reconciliation& r);
  std::optional<ExitFile> ReadExitFile(const RunRecord& run, int attempt) const;

  void ArmTimer(boost::asio::steady_timer& timer, std::chrono::milliseconds every,
                void (Controller::*tick)());
  void ReconcileTimerTick() { ReconcileTick(false); }

  ControllerConfig config_;
  std::unique_ptr<Store> store_;
  std::shared_ptr<SlurmClient> slurm_;
  const Clock* clock_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  boost::asio::thread_pool slurm_pool_{1};
  boost::asio::steady_timer schedule_timer_;
  boost::asio::steady_timer reconcile_timer_;
  std::thread loop_thread_;
  Watchers watchers_;
  std::map<LaunchKey, LaunchState> launches_;
  // The latest step record of every rank, per run (memory only; see
  // docs/architecture.md, "Store").
  RankLatestTable rank_latest_;
  std::set<std::string> submitting_;  // runs with an sbatch in flight
  bool schedule_in_flight_ = false;
  bool reconcile_in_flight_ = false;
  bool stopped_ = false;  // loop thread only
  std::atomic<bool> shutdown_begun_{false};
};

}  // namespace trellis::controller
