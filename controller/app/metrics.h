#pragma once
// The controller's own /metrics (docs/architecture.md, "The controller's metrics"): runs by
// state, attempts, launches, restarts by failure class, the gate's decisions
// and socket figures, quarantine, run health's figures per run, and the
// controller's own latency, and each live run's goodput. Prometheus naming:
// base units, `_total` counters, trellis_build_info. Labels stay bounded:
// run, node, socket and small enums (state, class, decision, method,
// command); never a step, a Slurm job id, an attempt number or free text. A
// run's series are removed when it ends.
//
// Threads: the hooks are called on the controller's loop thread, from the
// places that already see the facts (Controller::Apply, the gate's outcome, a
// launch's settlement, run health's steps). The Observe* durations may come
// from other threads (gRPC's, the Slurm thread): they touch only histograms
// made at construction, and prometheus-cpp locks each metric.

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/node_probe.h"
#include "controller/core/failure_class.h"
#include "controller/core/goodput.h"
#include "controller/core/run_state.h"
#include "controller/core/straggler.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace prometheus {
}  // namespace prometheus

namespace trellis::controller {

// The unary gRPC methods whose time from request to reply is measured. The
// streams (WatchRun, ReadLogs, Report) are not: they last as long as
// their client wants. Register's time includes the wait for the gate.
enum class RpcMethod {
  kSubmitRun,
  kGetRun,
  kListRuns,
  kCancelRun,
  kListNodes,
  kQuarantineNode,
  kReleaseNode,
  kGateReport,
  kRunSteps,
  kRegister,
  kReportExit,
  kNextLaunch,
  kStandBy,  // held until the next reconciliation: its time is mostly that wait
};
inline constexpr size_t kRpcMethods = 13;

enum class SlurmCommand { kSbatch, kSqueue, kScontrol, kSacct, kScancel, kSinfo, kSacctmgr };
inline constexpr size_t kSlurmCommands = 7;

class Metrics {
 public:
  using Duration = std::chrono::steady_clock::duration;

  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // --- the loop thread ---
  // At start: the store's runs by state.
  void SetRuns(const std::map<RunState, int64_t>& by_state);
  void RunQueued();  // a new run
  // A stored transition: runs by state; -> SUBMITTED is a new attempt; a
  // terminal state removes the run's series.
  void Transition(const std::string& run_id, RunState from, RunState to);
  // The gate of a launch decided: its figures per probed socket replace the
  // run's previous gate's.
  void GateDecided(const std::string& run_id, bool go,
                   const std::map<std::string, NodeProbe>& probes);
  // A launch of the run passed its gate: the run's counters of restarts and
  // straggler events exist from here (at 0), so increase() sees their first.
  void LaunchStarted(const std::string& run_id);
  // A relaunch inside the allocation, or a new attempt after a failure, by
  // the failure class of the launch (nullopt: unclassified, e.g. the job
  // ended unseen): counted for all runs by class, and for the run.
  void Restart(const std::string& run_id, std::optional<FailureClass> cls, bool relaunch);
  void NodeStruck(const std::string& node);
  void SetQuarantinedNodes(size_t nodes);
  // Records waiting in the workers' spools (step_spools.h).
  void SetUnstoredStepRecords(int64_t records);
  // The runs' live spare pool jobs' nodes, by state (spare_pools.h).
  void SetSparePoolNodes(int64_t queued, int64_t standing, int64_t drawn);
  void Straggler(const std::string& run_id);
  // Every rank of the run's running launch reported `spread.step`; `tokens`
  // is their sum.
  void StepComplete(const std::string& run_id, const StepSpread& spread, int64_t tokens);
  // The hang timeout in force for the run's running launch (hang_timeout.h).
  void SetHangTimeout(const std::string& run_id, double seconds);
  // A live run's goodput as computed now (at its transitions and every
  // reconciliation). queued, gating, redone and restarting only grow: they
  // are counters, each advanced by the difference to what it exported (a
  // value computed lower, which only a late step record can make, waits until
  // passed). running falls at a restart (goodput.h): a gauge, as the ratio.
  void SetGoodput(const std::string& run_id, const Goodput& g);

  // --- any thread ---
  void ObserveRpc(RpcMethod method, Duration d);
  void ObserveSlurm(SlurmCommand command, Duration d);
  void ObserveStoreWrite(Duration d);

 private:
  using Gauges = prometheus::Family<prometheus::Gauge>;
  using Counters = prometheus::Family<prometheus::Counter>;
  using Histograms = prometheus::Family<prometheus::Histogram>;
  // A run's series, made when first needed.
  struct RunSeries {
    std::vector<prometheus::Gauge*> socket_free, socket_unattributed;
    prometheus::Counter* stragglers = nullptr;
    prometheus::Counter* restarts = nullptr;
    prometheus::Gauge* tokens_per_second = nullptr;
    prometheus::Gauge* slowest_step = nullptr;
    prometheus::Gauge* median_step = nullptr;
    prometheus::Gauge* slowest_rank = nullptr;
    prometheus::Gauge* last_step = nullptr;
    prometheus::Gauge* hang_timeout = nullptr;
    // Goodput: the counters of queued, gating, redone and restarting, what
    // each exported, and the gauges.
    std::array<prometheus::Counter*, 5> state_seconds{};
    std::array<double, 5> state_exported{};
    prometheus::Gauge* running_seconds = nullptr;
    prometheus::Gauge* goodput_ratio = nullptr;
  };
  void RemoveGate(RunSeries& r);
  void RemoveRun(const std::string& run_id);
  // The run's counters that exist from its first launch.
  RunSeries& RunCounters(const std::string& run_id);

  std::shared_ptr<prometheus::Registry> registry_;
  Gauges& runs_;
  prometheus::Counter& attempts_;
  prometheus::Counter& launches_;
  Counters& restarts_;
  Counters& run_restarts_;
  prometheus::Counter& relaunches_;
  Counters& gate_decisions_;
  Gauges& socket_free_;
  Gauges& socket_unattributed_;
  prometheus::Gauge& quarantined_;
  prometheus::Gauge& unstored_steps_;
  Gauges& pool_nodes_;
  Counters& strikes_;
  Counters& stragglers_;
  Gauges& tokens_per_second_;
  Gauges& slowest_step_;
  Gauges& median_step_;
  Gauges& slowest_rank_;
  Gauges& last_step_;
  Gauges& hang_timeout_;
  Counters& state_seconds_;
  Gauges& running_seconds_;
  Gauges& goodput_ratio_;
  Histograms& rpc_duration_;
  Histograms& slurm_duration_;
  prometheus::Histogram& store_write_;

  std::map<RunState, prometheus::Gauge*> runs_by_state_;
  std::map<std::string, prometheus::Counter*, std::less<>> restarts_by_class_;
  prometheus::Counter* go_ = nullptr;
  prometheus::Counter* abort_ = nullptr;
  std::array<prometheus::Histogram*, kRpcMethods> rpc_{};
  std::array<prometheus::Histogram*, kSlurmCommands> slurm_{};
  std::map<std::string, RunSeries> run_series_;
};

}  // namespace trellis::controller
