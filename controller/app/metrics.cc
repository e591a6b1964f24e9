#include "controller/app/metrics.h"

#include <exception>

#include "common/clock.h"
#include "common/version.h"
#include "controller/app/scrape_targets.h"

namespace trellis::controller {

namespace {

constexpr std::string_view kRpcNames[] = {
    "SubmitRun",   "GetRun",     "ListRuns", "CancelRun",  "ListNodes", "QuarantineNode",
    "ReleaseNode", "GateReport", "RunSteps", "Register", "ReportExit", "NextLaunch",
    "StandBy"};
static_assert(std::size(kRpcNames) == kRpcMethods);
constexpr std::string_view kSlurmNames[] = {"sbatch", "squeue", "scontrol", "sacct",
                                            "scancel", "sinfo", "sacctmgr"};
static_assert(std::size(kSlurmNames) == kSlurmCommands);
constexpr std::string_view kUnclassified = "unknown";
// The goodput categories that only grow (counters), in RunSeries order.
constexpr std::string_view kGrowingStates[] = {"queued", "gating", "redone", "restarting",
                                               "handoff"};

// Register waits for the gate (up to gate.timeout_s), hence the long tail.
const prometheus::Histogram::BucketBoundaries kRpcBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
// Slurm commands time out after --slurm-timeout-s (30 s by default).
const prometheus::Histogram::BucketBoundaries kSlurmBuckets = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
const prometheus::Histogram::BucketBoundaries kStoreBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1};

template <typename T>
prometheus::Family<T>& Build(prometheus::detail::Builder<T> builder, const char* name,
                             const char* help, prometheus::Registry& registry) {
  return builder.Name(name).Help(help).Register(registry);
}

}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      runs_(Build(prometheus::BuildGauge(), "trellis_runs", "Runs by state", *registry_)),
      attempts_(Build(prometheus::BuildCounter(), "trellis_attempts_total",
                      "Attempts submitted to Slurm (sbatch)", *registry_)
                    .Add({})),
      launches_(Build(prometheus::BuildCounter(), "trellis_launches_total",
                      "Launches that passed the gate (GO)", *registry_)
                    .Add({})),
      restarts_(Build(prometheus::BuildCounter(), "trellis_restarts_total",
                      "Relaunches and new attempts after a failure, by the launch's failure class",
                      *registry_)),
      run_restarts_(Build(prometheus::BuildCounter(), "trellis_run_restarts_total",
                          "Relaunches and new attempts after a failure, of one run", *registry_)),
      relaunches_(Build(prometheus::BuildCounter(), "trellis_relaunches_total",
                        "Relaunches inside a Slurm allocation", *registry_)
                      .Add({})),
      gate_decisions_(Build(prometheus::BuildCounter(), "trellis_gate_decisions_total",
                            "Gate decisions by outcome", *registry_)),
      socket_free_(Build(prometheus::BuildGauge(), "trellis_gate_socket_free_bytes",
                         "Free memory of a socket at the run's latest gate", *registry_)),
      socket_unattributed_(Build(prometheus::BuildGauge(), "trellis_gate_socket_unattributed_bytes",
                                 "Used memory no page counter explains, of a socket at the run's "
                                 "latest gate",
                                 *registry_)),
      quarantined_(Build(prometheus::BuildGauge(), "trellis_quarantined_nodes",
                         "Nodes in quarantine now", *registry_)
                       .Add({})),
      unstored_steps_(Build(prometheus::BuildGauge(), "trellis_step_records_unstored",
                            "Step records the workers kept in spools, not yet stored",
                            *registry_)
                          .Add({})),
      pool_nodes_(Build(prometheus::BuildGauge(), "trellis_spare_pool_nodes",
                        "Nodes of the runs' live spare pool jobs, by state: queued (asked for, "
                        "not running yet), standing (running, ready to join a relaunch), drawn "
                        "(joined a relaunch)",
                        *registry_)),
      strikes_(Build(prometheus::BuildCounter(), "trellis_node_strikes_total",
                     "Quarantine strikes against a node", *registry_)),
      stragglers_(Build(prometheus::BuildCounter(), "trellis_straggler_events_total",
                        "Straggler events of a run", *registry_)),
      tokens_per_second_(Build(prometheus::BuildGauge(), "trellis_run_tokens_per_second",
                               "Tokens of the run's latest complete step over its slowest rank's "
                               "step time",
                               *registry_)),
      slowest_step_(Build(prometheus::BuildGauge(), "trellis_run_slowest_step_seconds",
                          "The slowest rank's step time at the run's latest complete step",
                          *registry_)),
      median_step_(Build(prometheus::BuildGauge(), "trellis_run_median_step_seconds",
                         "The median rank step time at the run's latest complete step",
                         *registry_)),
      slowest_rank_(Build(prometheus::BuildGauge(), "trellis_run_slowest_rank",
                          "The slowest rank's number at the run's latest complete step",
                          *registry_)),
      last_step_(Build(prometheus::BuildGauge(), "trellis_run_last_step",
                       "The run's latest step every rank reported", *registry_)),
      hang_timeout_(Build(prometheus::BuildGauge(), "trellis_hang_timeout_seconds",
                          "The hang timeout in force for the run's running launch, learned "
                          "or the spec's",
                          *registry_)),
      state_seconds_(Build(prometheus::BuildCounter(), "trellis_run_state_seconds_total",
                           "Seconds of a live run since submission by goodput category "
                           "(docs/architecture.md, Goodput): queued, gating, redone, restarting, handoff. "
                           "Each only grows (advanced by positive differences); kept training "
                           "time, which a restart lowers, is trellis_run_running_seconds",
                           *registry_)),
      running_seconds_(Build(prometheus::BuildGauge(), "trellis_run_running_seconds",
                             "Seconds of a live run's RUNNING time whose progress was kept; falls "
                             "when a restart finds steps lost and redone",
                             *registry_)),
      goodput_ratio_(Build(prometheus::BuildGauge(), "trellis_run_goodput_ratio",
                           "Kept running time over a live run's time since submission (0..1)",
                           *registry_)),
      rpc_duration_(Build(prometheus::BuildHistogram(), "trellis_rpc_duration_seconds",
                          "Time from a gRPC request to its reply", *registry_)),
      slurm_duration_(Build(prometheus::BuildHistogram(), "trellis_slurm_command_duration_seconds",
                            "Time a Slurm command took", *registry_)),
      store_write_(Build(prometheus::BuildHistogram(), "trellis_store_write_duration_seconds",
                         "Time of a store write or transition (one SQLite transaction)", *registry_)
                       .Add({}, kStoreBuckets)) {
  // Series of fixed label sets exist from the start (at 0), so rates and
  // increases see their first events.
  for (const RunStateInfo& s : AllRunStates())
    runs_by_state_[s.state] = &runs_.Add({{"state", std::string(s.name)}});
  // The classes a restart can have: kTerminated never restarts.
  for (int c = 0; c <= static_cast<int>(FailureClass::kDamagedCheckpoint); ++c) {
    auto cls = static_cast<FailureClass>(c);
    if (cls == FailureClass::kSucceeded || cls == FailureClass::kTerminated) continue;
    std::string name(FailureClassName(cls));
    restarts_by_class_[name] = &restarts_.Add({{"class", name}});
  }
  restarts_by_class_[std::string(kUnclassified)] =
      &restarts_.Add({{"class", std::string(kUnclassified)}});
  go_ = &gate_decisions_.Add({{"decision", "GO"}});
  abort_ = &gate_decisions_.Add({{"decision", "ABORT"}});
  for (size_t m = 0; m < kRpcMethods; ++m)
    rpc_[m] = &rpc_duration_.Add({{"method", std::string(kRpcNames[m])}}, kRpcBuckets);
  for (size_t c = 0; c < kSlurmCommands; ++c)
    slurm_[c] = &slurm_duration_.Add({{"command", std::string(kSlurmNames[c])}}, kSlurmBuckets);
  Build(prometheus::BuildGauge(), "trellis_build_info", "The controller's version (always 1)",
        *registry_)
      .Add({{"version", std::string(kVersion)}})
      .Set(1);
}

void Metrics::SetRuns(const std::map<RunState, int64_t>& by_state) {
  for (auto& [state, gauge] : runs_by_state_) {
    auto n = by_state.find(state);
    gauge->Set(n == by_state.end() ? 0 : static_cast<double>(n->second));
  }
}

void Metrics::RunQueued() { runs_by_state_.at(RunState::kQueued)->Increment(); }

void Metrics::Transition(const std::string& run_id, RunState from, RunState to) {
  runs_by_state_.at(from)->Decrement();
  runs_by_state_.at(to)->Increment();
  // A new attempt's sbatch; SUBMITTED after a later state is Slurm's requeue.
  if (to == RunState::kSubmitted && from == RunState::kQueued) attempts_.Increment();
  if (IsTerminal(to)) RemoveRun(run_id);
}

void Metrics::RemoveGate(RunSeries& r) {
  for (auto* g : r.socket_free) socket_free_.Remove(g);
  for (auto* g : r.socket_unattributed) socket_unattributed_.Remove(g);
  r.socket_free.clear();
  r.socket_unattributed.clear();
}

void Metrics::RemoveRun(const std::string& run_id) {
  auto it = run_series_.find(run_id);
  if (it == run_series_.end()) return;
  RunSeries& r = it->second;
  RemoveGate(r);
  if (r.stragglers) stragglers_.Remove(r.stragglers);
  if (r.restarts) run_restarts_.Remove(r.restarts);
  if (r.tokens_per_second) {
    tokens_per_second_.Remove(r.tokens_per_second);
    slowest_step_.Remove(r.slowest_step);
    median_step_.Remove(r.median_step);
    slowest_rank_.Remove(r.slowest_rank);
    last_step_.Remove(r.last_step);
  }
  if (r.hang_timeout) hang_timeout_.Remove(r.hang_timeout);
  if (r.goodput_ratio) {
    for (auto* c : r.state_seconds) state_seconds_.Remove(c);
    running_seconds_.Remove(r.running_seconds);
    goodput_ratio_.Remove(r.goodput_ratio);
  }
  run_series_.erase(it);
}

void Metrics::GateDecided(const std::string& run_id, bool go,
                          const std::map<std::string, NodeProbe>& probes) {
  (go ? go_ : abort_)->Increment();
  RunSeries& r = run_series_[run_id];
  RemoveGate(r);
  for (const auto& [node, probe] : probes) {
    for (const SocketProbe& s : probe.sockets) {
      prometheus::Labels labels{
          {"run", run_id}, {"node", node}, {"socket", std::to_string(s.numa_node)}};
      prometheus::Gauge& free = socket_free_.Add(labels);
      prometheus::Gauge& unattributed = socket_unattributed_.Add(labels);
      free.Set(static_cast<double>(s.free_bytes));
      unattributed.Set(static_cast<double>(s.unattributed_bytes));
      r.socket_free.push_back(&free);
      r.socket_unattributed.push_back(&unattributed);
    }
  }
}

Metrics::RunSeries& Metrics::RunCounters(const std::string& run_id) {
  RunSeries& r = run_series_[run_id];
  if (!r.stragglers) r.stragglers = &stragglers_.Add({{"run", run_id}});
  if (!r.restarts) r.restarts = &run_restarts_.Add({{"run", run_id}});
  return r;
}

void Metrics::LaunchStarted(const std::string& run_id) {
  launches_.Increment();
  RunCounters(run_id);
}

void Metrics::Restart(const std::string& run_id, std::optional<FailureClass> cls, bool relaunch) {
  RunCounters(run_id).restarts->Increment();
  std::string_view name = cls ? FailureClassName(*cls) : kUnclassified;
  auto it = restarts_by_class_.find(name);
  if (it == restarts_by_class_.end())  // kSucceeded: never a restart
    it = restarts_by_class_.find(kUnclassified);
  it->second->Increment();
  if (relaunch) relaunches_.Increment();
}

void Metrics::NodeStruck(const std::string& node) { strikes_.Add({{"node", node}}).Increment(); }

void Metrics::SetQuarantinedNodes(size_t nodes) { quarantined_.Set(static_cast<double>(nodes)); }

void Metrics::SetSparePoolNodes(int64_t queued, int64_t standing, int64_t drawn) {
  pool_nodes_.Add({{"state", "queued"}}).Set(static_cast<double>(queued));
  pool_nodes_.Add({{"state", "standing"}}).Set(static_cast<double>(standing));
  pool_nodes_.Add({{"state", "drawn"}}).Set(static_cast<double>(drawn));
}

void Metrics::SetUnstoredStepRecords(int64_t records) {
  unstored_steps_.Set(static_cast<double>(records));
}

void Metrics::Straggler(const std::string& run_id) { RunCounters(run_id).stragglers->Increment(); }

void Metrics::StepComplete(const std::string& run_id, const StepSpread& spread, int64_t tokens) {
  RunSeries& r = run_series_[run_id];
  if (!r.tokens_per_second) {
    prometheus::Labels labels{{"run", run_id}};
    r.tokens_per_second = &tokens_per_second_.Add(labels);
    r.slowest_step = &slowest_step_.Add(labels);
    r.median_step = &median_step_.Add(labels);
    r.slowest_rank = &slowest_rank_.Add(labels);
    r.last_step = &last_step_.Add(labels);
  }
  r.tokens_per_second->Set(spread.slowest_s > 0 ? static_cast<double>(tokens) / spread.slowest_s
                                                : 0);
  r.slowest_step->Set(spread.slowest_s);
  r.median_step->Set(spread.median_s);
  r.slowest_rank->Set(spread.slowest_rank);
  r.last_step->Set(static_cast<double>(spread.step));
}

void Metrics::SetHangTimeout(const std::string& run_id, double seconds) {
  RunSeries& r = run_series_[run_id];
  if (!r.hang_timeout) r.hang_timeout = &hang_timeout_.Add({{"run", run_id}});
  r.hang_timeout->Set(seconds);
}

void Metrics::SetGoodput(const std::string& run_id, const Goodput& g) {
  RunSeries& r = run_series_[run_id];
  if (!r.goodput_ratio) {
    for (size_t i = 0; i < std::size(kGrowingStates); ++i)
      r.state_seconds[i] =
          &state_seconds_.Add({{"run", run_id}, {"state", std::string(kGrowingStates[i])}});
    r.running_seconds = &running_seconds_.Add({{"run", run_id}});
    r.goodput_ratio = &goodput_ratio_.Add({{"run", run_id}});
  }
  const Goodput::Span now[] = {g.queued, g.gating, g.redone, g.restarting, g.handoff};
  static_assert(std::size(now) == std::size(kGrowingStates) &&
                std::size(now) == std::tuple_size_v<decltype(r.state_seconds)>);
  for (size_t i = 0; i < std::size(now); ++i) {
    double value = std::chrono::duration<double>(now[i]).count();
    if (value <= r.state_exported[i]) continue;
    r.state_seconds[i]->Increment(value - r.state_exported[i]);
    r.state_exported[i] = value;
  }
  r.running_seconds->Set(std::chrono::duration<double>(g.running).count());
  r.goodput_ratio->Set(g.ratio());
}

void Metrics::ObserveRpc(RpcMethod method, Duration d) {
  rpc_[static_cast<size_t>(method)]->Observe(SecondsOf(d));
}

void Metrics::ObserveSlurm(SlurmCommand command, Duration d) {
  slurm_[static_cast<size_t>(command)]->Observe(SecondsOf(d));
}

void Metrics::ObserveStoreWrite(Duration d) { store_write_.Observe(SecondsOf(d)); }

}  // namespace trellis::controller
