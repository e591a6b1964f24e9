// `trellis-worker agent`: register, wait for the gate, run and supervise the
// node's ranks, stream their steps, report the exit.
#include "worker/app/agent.h"

#include <prometheus/registry.h>
#include <signal.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>

#include "common/log.h"
#include "common/loop_timer.h"
#include "common/metrics_server.h"
#include "common/run_layout.h"
#include "common/spec/run_spec.h"
#include "common/tls.h"
#include "common/version.h"
#include "worker/app/identity.h"
#include "worker/app/register_probe.h"
#include "worker/app/spec_file.h"
#include "worker/core/rank_layout.h"
#include "worker/io/cgroup_oom.h"
#include "worker/io/node_info.h"
#include "worker/io/rank_channel.h"
#include "worker/io/socket_dir.h"
#include "worker/io/supervisor.h"
#include "worker/io/sysfs_probe.h"
#include "worker/metrics/rank_metrics.h"
#include "worker/rpc/agent_client.h"
#include "worker/rpc/final_report_file.h"
#include "worker/rpc/step_spool_file.h"
#include "worker/rpc/step_stream.h"

namespace trellis::worker {
namespace {

namespace asio = boost::asio;

// After the last rank exits, how long to wait for its step socket to be read
// to the end (a child of the rank may still hold it open).
constexpr std::chrono::seconds kDrainBound{2};
// How long the final report keeps trying while the controller is unreachable
// (the file written before it speaks for the worker after that).
constexpr Seconds kReportExitTimeout{15};

template <typename D>
std::chrono::steady_clock::duration Steady(D d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(d);
}

bool IsRefusal(absl::StatusCode code) {
  return code == absl::StatusCode::kFailedPrecondition ||
         code == absl::StatusCode::kPermissionDenied ||
         code == absl::StatusCode::kUnauthenticated || code == absl::StatusCode::kNotFound;
}

// The step records the controller never stored, kept in the launch's
// directory for it to store later (worker/rpc/step_spool_file.h); how many.
int64_t SpoolUnstored(const AgentArgs& args, const v1::WorkerIdentity& id, StepStream& stream) {
  std::vector<v1::StepBatch> unstored = stream.TakeUnstored();
  int64_t records = 0;
  for (const v1::StepBatch& b : unstored) records += b.steps_size();
  if (records == 0) return 0;
  const std::string path = StepSpoolPath(args.run_dir, id.attempt(), id.launch(), id.node());
  std::error_code ec;  // made by the ranks, unless none started
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (absl::Status st = WriteStepSpoolFile(path, unstored); !st.ok()) {
    spdlog::error("{} step record(s) not stored and not kept: {}", records,
                  std::string(st.message()));
    return 0;
  }
  spdlog::warn("{} step record(s) not stored by the controller: kept in {} for it to store",
               records, path);
  return records;
}

// The final report: to the launch's directory first (made here when no rank
// started, which would have made it), so that a controller restarted after
// this worker gave up reads it; then to the controller.
void SendFinalReport(const AgentArgs& args, AgentClient& client,
                     const v1::ReportExitRequest& report) {
  const v1::WorkerIdentity& id = client.id();
  const std::string path = FinalReportPath(args.run_dir, id.attempt(), id.launch(), id.node());
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (absl::Status st = WriteFinalReportFile(path, report); !st.ok())
    spdlog::warn("final report file: {}", std::string(st.message()));
  if (absl::Status st = client.ReportExit(report, kReportExitTimeout); !st.ok())
    spdlog::warn("ReportExit failed: {}", std::string(st.message()));
}

// Ends a launch that got GO but could not start its ranks: the controller
// still learns why, after a restart too.
int FailLaunch(const AgentArgs& args, AgentClient& client, const std::string& why) {
  spdlog::error("{}", why);
  WorkerOutcome outcome{kExitError, why};
  SendFinalReport(args, client,
                  client.FinalReport({}, outcome, /*oom_kills=*/-1, /*planned_stop=*/""));
  return kExitError;
}

// Binding follows this machine's real topology, not the probe's sysfs root:
// a test cluster's fixture names sockets the machine may not have.
void SetNumaBinding(RankLayoutInput* layout) {
  auto sockets = SocketNodes("/sys");
  if (!sockets.ok()) {
    spdlog::warn("ranks are not bound to sockets: {}", std::string(sockets.status().message()));
    return;
  }
  layout->socket_nodes = *sockets;
  if (!WantsNumaBinding(*layout)) return;
  auto path = layout->worker_env.find("PATH");
  layout->numactl = FindExecutable("numactl", path != layout->worker_env.end() ? path->second : "");
  if (layout->numactl.empty())
    spdlog::warn("this node has {} sockets but numactl is not installed: ranks are not bound",
                 sockets->size());
}

// [model] ranks run trellis-rank, installed beside trellis-worker when Trellis
// was built with LibTorch (it hosts trainer_core; this process never loads it).
std::string RankBinary(const AgentArgs& args) {
  if (!args.rank_binary.empty()) return args.rank_binary;
  const std::string self = SelfExecutable();
  return self.substr(0, self.rfind('/') + 1) + "trellis-rank";
}

// Generic mode runs the spec's command; [model] mode runs trellis-rank.
std::vector<std::string> RankArgv(const spec::RunSpec& spec, const AgentArgs& args) {
  if (!spec.has_model) return spec.job.command;
  return {RankBinary(args), "--run-dir", args.run_dir};
}

// The node's /metrics: up before Register, so that its address goes with the
// registration, and until the worker exits. A bind failure does not keep the
// worker from registering: a GO then fails the launch with it, so the
// controller learns why. Null when metrics are off.
absl::StatusOr<std::unique_ptr<MetricsServer>> ServeMetrics(
    const AgentArgs& args, const std::shared_ptr<prometheus::Registry>& registry,
    NodeFacts* facts) {
  if (args.metrics_listen == kMetricsOff) return nullptr;
  auto server = MetricsServer::Start(args.metrics_listen);
  if (!server.ok()) {
    spdlog::error("{}; the launch fails if this node gets GO",
                  std::string(server.status().message()));
    return server;
  }
  (*server)->Serve(registry);
  facts->metrics_addr =
      AdvertisedMetricsAddress(args.metrics_listen, facts->hostname, (*server)->port());
  spdlog::info("serving the ranks' metrics on {} (http://{}/metrics)", args.metrics_listen,
               facts->metrics_addr);
  return server;
}

int Supervise(const AgentArgs& args, const spec::RunSpec& spec, const GoDecision& go,
              AgentClient& client, RankMetrics& metrics, Clock& clock) {
  auto socket_dir = SocketDir::Create();
  if (!socket_dir.ok())
    return FailLaunch(args, client, std::string(socket_dir.status().message()));

  RankLayoutInput layout;
  layout.launch = {args.id.run_id, args.id.attempt, args.id.launch};
  layout.go = go;
  layout.spec_ranks_per_node = spec.slurm.ranks_per_node;
  layout.gpus_per_node = spec.slurm.gpus_per_node;
  layout.spec_env = spec.env;
  layout.worker_env = CurrentEnvironment();
  layout.run_dir = args.run_dir;
  layout.socket_dir = (*socket_dir)->path();
  SetNumaBinding(&layout);
  auto plans = PlanRanks(layout);
  if (!plans.ok()) return FailLaunch(args, client, std::string(plans.status().message()));

  asio::io_context io;
  StepStream::Options stream_options;
  stream_options.max_held = static_cast<size_t>(args.max_queued_reports);
  StepStream stream(client.link(), client.id(), stream_options, clock);
  stream.Start();
  RankChannel channel(io, clock, [&](int rank, const StepRecord& r) {
    metrics.OnStep(rank, r, clock.Now());
    stream.SendStep(rank, r);
  });
  for (const RankPlan& p : *plans) {
    if (absl::Status st = channel.Listen(p.global_rank, p.step_socket); !st.ok()) {
      stream.Close(Steady(args.stream_flush));
      return FailLaunch(args, client, std::string(st.message()));
    }
  }

  LoopTimer heartbeat(clock, [&io](std::function<void()> fn) { asio::post(io, std::move(fn)); });
  LoopTimer state_watch(clock, [&io](std::function<void()> fn) { asio::post(io, std::move(fn)); });
  asio::signal_set signals(io, SIGTERM, SIGINT, SIGUSR1);
  std::string planned_stop;  // "time_limit" once Slurm's warning came
  // A stop passed on to the ranks (they may write a last checkpoint): the
  // heartbeats say so, and the controller's hang timeout is the spec's again.
  bool stopping = false;
  Supervisor supervisor(
      io, clock, Steady(args.kill_grace),
      [&](const RankExit& e) {
        metrics.OnRankEnded(e.rank);
        stream.SendRankExit(e);
      },
      [&] {
        heartbeat.Cancel();
        state_watch.Cancel();
        boost::system::error_code ignored;
        signals.cancel(ignored);
        channel.Drain(kDrainBound, [&] { io.stop(); });
      });

  std::function<void()> wait_signal = [&] {
    signals.async_wait([&](boost::system::error_code ec, int sig) {
      if (ec) return;
      if (sig == SIGUSR1) {
        // Slurm's wall-time warning: the ranks checkpoint at their next step
        // boundary and exit (the rank contract, README "Time limits"); the
        // launch ends as a time-limit stop and the run continues in a new
        // attempt from its newest checkpoint.
        spdlog::info("SIGUSR1 (wall-time warning): passing it on to the ranks");
        planned_stop = "time_limit";
        supervisor.Forward(SIGUSR1);
      } else {
        supervisor.Stop(std::string("worker received SIG") + sigabbrev_np(sig));
      }
      if (!stopping) stream.SendHeartbeat(supervisor.alive(), true);
      stopping = true;
      wait_signal();
    });
  };
  std::function<void()> beat = [&] {
    stream.SendHeartbeat(supervisor.alive(), stopping, supervisor.RankStates());
    heartbeat.Arm(Steady(args.heartbeat_interval), beat);
  };
  // A rank whose process is stopped or stuck in the kernel is said at once,
  // not at the next heartbeat: the controller's hang verdict names it.
  std::map<int, char> stuck_said;
  std::function<void()> watch_states = [&] {
    const std::map<int, char> states = supervisor.RankStates();
    std::map<int, char> stuck;
    for (const auto& [rank, state] : states)
      if (state == 'T' || state == 't' || state == 'D') stuck[rank] = state;
    if (stuck != stuck_said) {
      stuck_said = stuck;
      stream.SendHeartbeat(supervisor.alive(), stopping, states);
    }
    state_watch.Arm(std::chrono::seconds(1), watch_states);
  };

  spdlog::info("GO: ranks {}..{} of {}, master {}:{}, resume step {}", go.rank_offset,
               go.rank_offset + go.ranks_per_node - 1, go.world_size, go.master_addr,
               go.master_port, go.resume_step);
  for (const RankPlan& p : *plans) {
    if (p.numa_node >= 0)
      spdlog::info("rank {}: CPUs and memory bound to socket {}", p.global_rank, p.numa_node);
    metrics.OnStart(p.global_rank, RankInfoFor(p));
  }
  wait_signal();
  const std::optional<int64_t> oom_kills_at_go = ReadJobOomKills();
  if (!oom_kills_at_go)
    spdlog::info("the job cgroup's oom_kill counter is unreadable: OOM kills are not reported");
  // On this thread, which runs the loop until the ranks end: each rank's
  // death signal (PR_SET_PDEATHSIG, worker/io/rank_process.cc) is tied to it.
  supervisor.Start(*plans, RankArgv(spec, args), args.run_dir);
  beat();
  watch_states();
  io.run();

  const int oom_kills = OomKillsBetween(oom_kills_at_go, ReadJobOomKills());
  if (oom_kills > 0)
    spdlog::warn("the kernel's OOM killer ended {} process(es) of this job during the launch",
                 oom_kills);
  WorkerOutcome outcome =
      DecideOutcome(supervisor.exits(), supervisor.expected(), supervisor.stop_cause());
  RankChannel::Stats cs = channel.stats();
  spdlog::info("{}; {} step record(s), {} bad line(s) from the ranks", outcome.reason, cs.records,
               cs.bad_lines);
  stream.Close(Steady(args.stream_flush));
  StepStream::Stats ss = stream.stats();
  if (ss.dropped > 0 || ss.refused > 0 || ss.reconnects > 0)
    spdlog::warn("step records: {} stored, {} dropped (--max-queued-reports reached), {} "
                 "refused by the controller; {} reconnect(s)",
                 ss.stored, ss.dropped, ss.refused, ss.reconnects);
  v1::ReportExitRequest report =
      client.FinalReport(supervisor.exits(), outcome, oom_kills, planned_stop);
  report.set_unstored_step_records(SpoolUnstored(args, client.id(), stream));
  SendFinalReport(args, client, std::move(report));
  return outcome.exit_code;
}

}  // namespace

int RunAgent(const AgentArgs& args, Clock& clock) {
  // Until the event loop takes them over: a wall-time warning during the gate
  // wait must not kill the worker, and sockets must not raise SIGPIPE.
  ::signal(SIGUSR1, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);

  auto spec = LoadSpec(args.run_dir);
  if (!spec.ok()) {
    spdlog::error("{}", std::string(spec.status().message()));
    return kExitUsage;
  }
  if (spec->has_model && ::access(RankBinary(args).c_str(), X_OK) != 0) {
    spdlog::error("this is a [model] run, but {} is missing or not executable: build Trellis "
                  "with LibTorch (trellis-rank is built only then) and install it beside "
                  "trellis-worker",
                  RankBinary(args));
    return kExitUsage;
  }
  auto id = LoadIdentity(args.id);
  if (!id.ok()) {
    spdlog::error("{}", std::string(id.status().message()));
    return kExitUsage;
  }
  NodeFacts facts{kVersion, Hostname(), CountGpus(), CountCpus(), {}};
  // This launch's srun step, which the controller can cancel on its own.
  auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value != nullptr ? value : "");
  };
  facts.slurm_job_id = env("SLURM_JOB_ID");
  facts.slurm_step_id = env("SLURM_STEP_ID");
  // Before the channel exists: the touch probe forks, gRPC's threads must not yet.
  facts.probe = ProbeMemoryForRegister(
      ResolveSysfsRoot(args.sysfs_root, std::getenv("TRELLIS_SYSFS_ROOT"), args.id.node),
      spec->gate.touch_probe, args.touch_probe_gib, args.touch_probe_budget, clock.Now());
  // After the touch probe too (it forks): the metrics server's threads start here.
  auto registry = std::make_shared<prometheus::Registry>();
  AddBuildInfo(*registry, kVersion);
  RankMetrics metrics(*registry, args.id.run_id, args.id.node);
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics_server =
      ServeMetrics(args, registry, &facts);
  auto credentials = tls::ChannelCredentials("--tls-ca", args.id.tls_ca);
  if (!credentials.ok()) {
    spdlog::error("{}", std::string(credentials.status().message()));
    return kExitUsage;
  }
  AgentClient client(
      std::make_shared<ControllerLink>(args.id.controller, args.id.controller_file, *credentials),
      *id, clock);
  Seconds gate_wait = args.gate_wait.value_or(Seconds(spec->gate.timeout_s) + kGateWaitMargin);
  spdlog::info("registering node {} with {} (run {}, attempt {}, launch {}; {} GPU(s), {} CPU(s))",
               args.id.node, client.link()->address(), args.id.run_id, args.id.attempt,
               args.id.launch, facts.gpus, facts.cpus);
  auto gate = client.Register(facts, args.register_retry, gate_wait);
  if (!gate.ok()) {
    if (IsRefusal(gate.status().code())) {
      spdlog::error("the controller refused this worker: {}", std::string(gate.status().message()));
      return kExitRefused;
    }
    spdlog::error("registration failed: {}", std::string(gate.status().message()));
    return kExitError;
  }
  switch (gate->kind) {
    case GateResult::kAbort:
      spdlog::error("gate: ABORT: {}", gate->reason);
      return kExitGateAbort;
    case GateResult::kStandby:
      spdlog::info("gate: STANDBY (this node is a spare): {}", gate->reason);
      return 0;
    case GateResult::kGo:
      break;
  }
  if (!metrics_server.ok())
    return FailLaunch(args, client, std::string(metrics_server.status().message()));
  return Supervise(args, *spec, gate->go, client, metrics, clock);
}

}  // namespace trellis::worker
