// trellis-worker: the per-node agent. Flag parsing and wiring only.
#include <CLI/CLI.hpp>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/version.h"
#include "worker/app/agent.h"
#include "worker/io/node_info.h"

namespace {

using trellis::worker::IdentityArgs;
using trellis::worker::Seconds;

void AddControllerFileFlag(CLI::App* cmd, std::string* path) {
  cmd->add_option("--controller-file", *path,
                  "The controller's address file (<state dir>/controller.address, absolute): "
                  "its address wins over --controller, and it is read again whenever the "
                  "controller cannot be reached, to follow a controller that moved to another "
                  "host; without it, --controller only");
}

void AddIdentityFlags(CLI::App* cmd, IdentityArgs* id) {
  cmd->add_option("--controller", id->controller, "Controller address, HOST:PORT")->required();
  cmd->add_option("--run", id->run_id, "Run id")->required();
  cmd->add_option("--attempt", id->attempt, "Attempt number (one Slurm job), from 1")->required();
  cmd->add_option("--launch", id->launch, "Launch number inside the attempt, from 1")->required();
  cmd->add_option("--secret-file", id->secret_file,
                  "File holding the attempt's secret (surrounding whitespace is ignored)")
      ->required();
  cmd->add_option("--tls-ca", id->tls_ca,
                  "CA certificate file to verify the controller's TLS certificate with "
                  "(the controller serves TLS); without it, plain TCP");
  cmd->add_option("--node", id->node,
                  "This node's name (default: $SLURMD_NODENAME, else the "
                  "host name)");
  AddControllerFileFlag(cmd, &id->controller_file);
}

void AddSeconds(CLI::App* cmd, const std::string& flag, Seconds* value, const std::string& help) {
  cmd->add_option_function<double>(
         flag, [value](double s) { *value = Seconds(s); }, help)
      ->default_str(absl::StrCat(value->count()))
      ->type_name("SECONDS");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"trellis-worker: runs one node's ranks of a Trellis training run"};
  app.set_version_flag("--version", trellis::kVersion);
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn or error")
      ->capture_default_str();

  trellis::worker::AgentArgs agent;
  CLI::App* agent_cmd = app.add_subcommand(
      "agent",
      "Register with the controller, wait for the launch gate, run and supervise this "
      "node's ranks, stream their step records. Exit code: 0 when all ranks exited 0 or "
      "the node is a spare, else the first failing rank's (128+signal when killed), 75 "
      "gate ABORT, 78 refused by the controller, 2 bad arguments or spec, 1 other errors");
  AddIdentityFlags(agent_cmd, &agent.id);
  agent_cmd
      ->add_option("--run-dir", agent.run_dir,
                   "Run directory: spec.toml is read from it, rank logs go under "
                   "attempt-A/launch-L/, ranks start in it")
      ->required();
  AddSeconds(agent_cmd, "--heartbeat-interval", &agent.heartbeat_interval,
             "Seconds between heartbeats on the step stream");
  AddSeconds(agent_cmd, "--kill-grace", &agent.kill_grace,
             "Seconds between SIGTERM and SIGKILL when stopping ranks");
  AddSeconds(agent_cmd, "--register-retry", &agent.register_retry,
             "Seconds to keep retrying Register while the controller is unreachable");
  agent_cmd
      ->add_option_function<double>(
          "--gate-wait", [&agent](double s) { agent.gate_wait = Seconds(s); },
          "Seconds Register may wait for the gate's decision (default: the spec's gate.timeout_s "
          "+ 60)")
      ->type_name("SECONDS");
  AddSeconds(agent_cmd, "--stream-flush", &agent.stream_flush,
             "Seconds at exit for the controller to store what is still held");
  agent_cmd
      ->add_option("--max-queued-reports", agent.max_queued_reports,
                   "Step records kept until the controller has stored them (sent again "
                   "after a broken stream); beyond it the oldest are dropped and counted")
      ->capture_default_str();

  agent_cmd->add_option("--rank-binary", agent.rank_binary,
                        "Program each rank of a [model] run runs (default: trellis-rank beside "
                        "this trellis-worker)");
  agent_cmd->add_option("--sysfs-root", agent.sysfs_root,
                        "Directory holding devices/system/node for the memory probe (default: "
                        "$TRELLIS_SYSFS_ROOT with %n replaced by the node name, else /sys)");
  agent_cmd
      ->add_option("--touch-probe-gib", agent.touch_probe_gib,
                   "With the spec's gate.touch_probe: GiB to allocate and touch per socket, "
                   "at most")
      ->capture_default_str();
  AddSeconds(agent_cmd, "--touch-probe-seconds", &agent.touch_probe_budget,
             "With the spec's gate.touch_probe: time budget of the touch probe, all sockets "
             "together");
  agent_cmd
      ->add_option("--metrics-listen", agent.metrics_listen,
                   "HOST:PORT where this node's ranks' Prometheus metrics are served on "
                   "/metrics (port 0: any free port; the address goes to the controller with "
                   "the registration), or 'off'")
      ->capture_default_str();

  trellis::worker::NextLaunchArgs next;
  CLI::App* next_cmd = app.add_subcommand(
      "next-launch",
      "After a launch ends, ask the controller what the batch script does next. "
      "Prints one line: 'relaunch <launch> <node,node|->' (the nodes the next launch "
      "runs on; '-': all of the allocation) or 'exit <code>' "
      "(the step's own code when the controller cannot be reached)");
  AddIdentityFlags(next_cmd, &next.id);
  next_cmd->add_option("--step-exit-code", next.step_exit_code, "srun's exit status for the launch")
      ->required();
  AddSeconds(next_cmd, "--timeout", &next.timeout,
             "Seconds to keep trying to reach the controller");
  next_cmd->add_option("--requeued", next.requeue_count,
                       "Slurm requeued the job ($SLURM_RESTART_COUNT): the batch script starts "
                       "over with --launch 0 and asks which launch comes next");
  next_cmd->add_option("--allocation", next.allocation_nodelist,
                       "With --requeued: the allocation's nodes ($SLURM_JOB_NODELIST)");
  next_cmd->add_flag("--terminated-by-slurm", next.terminated_by_slurm,
                     "Slurm signalled the batch script (scancel, requeue, preemption, the time "
                     "limit): the job's end in Slurm decides what follows, not this launch");
  next_cmd->add_flag("--time-limit-warned", next.time_limit_warned,
                     "Slurm's wall-time warning (USR1) came during the launch: it stopped for "
                     "the time limit, and the run continues in a new attempt");

  trellis::worker::StandbyArgs standby;
  CLI::App* standby_cmd = app.add_subcommand(
      "standby",
      "The step of a run's spare pool job (restart.spare_pool_nodes): probe this node's "
      "memory, register it with the controller (which gates it), and wait until the "
      "controller says the pool job was drawn into a relaunch or ended. Exit code: 0 told "
      "to leave, 78 refused by the controller, 2 bad arguments, spec or secret file");
  standby_cmd->add_option("--controller", standby.controller, "Controller address, HOST:PORT")
      ->required();
  standby_cmd->add_option("--run", standby.run_id, "Run id")->required();
  standby_cmd->add_option("--pool", standby.pool, "The run's pool job number, from 1")->required();
  standby_cmd
      ->add_option("--secret-file", standby.secret_file,
                   "File holding the pool job's secret (surrounding whitespace is ignored)")
      ->required();
  standby_cmd->add_option("--run-dir", standby.run_dir, "Run directory: spec.toml is read from it")
      ->required();
  standby_cmd->add_option("--tls-ca", standby.tls_ca,
                          "CA certificate file to verify the controller's TLS certificate with "
                          "(the controller serves TLS); without it, plain TCP");
  standby_cmd->add_option("--node", standby.node,
                          "This node's name (default: $SLURMD_NODENAME, else the host name)");
  standby_cmd->add_option("--sysfs-root", standby.sysfs_root,
                          "Directory holding devices/system/node for the memory probe (default: "
                          "$TRELLIS_SYSFS_ROOT with %n replaced by the node name, else /sys)");
  standby_cmd
      ->add_option("--touch-probe-gib", standby.touch_probe_gib,
                   "With the spec's gate.touch_probe: GiB to allocate and touch per socket, "
                   "at most")
      ->capture_default_str();
  AddSeconds(standby_cmd, "--touch-probe-seconds", &standby.touch_probe_budget,
             "With the spec's gate.touch_probe: time budget of the touch probe, all sockets "
             "together");
  AddSeconds(standby_cmd, "--call-timeout", &standby.call_timeout,
             "Seconds one StandBy call may wait for its answer before it is made again");
  AddControllerFileFlag(standby_cmd, &standby.controller_file);

  trellis::worker::CheckArgs check;
  CLI::App* check_cmd = app.add_subcommand(
      "check",
      "trellis doctor's look at this node: prints one JSON line per check on stdout "
      "(worker, path P, controller, numa, gpus). Exit code: 0 when no check failed, 1 when "
      "one did, 2 bad arguments");
  check_cmd->add_option("--controller", check.controller,
                        "Controller address, HOST:PORT (none, and no --controller-file naming "
                        "one: no controller serves yet, and its line is skipped)");
  AddControllerFileFlag(check_cmd, &check.controller_file);
  check_cmd->add_option("--tls-ca", check.tls_ca,
                        "CA certificate file to verify the controller's TLS certificate with "
                        "(the controller serves TLS); without it, plain TCP");
  check_cmd->add_option("--path", check.paths,
                        "An absolute path the ranks need (run directory, data): checked "
                        "readable from this node; repeatable")
      ->allow_extra_args(false);
  check_cmd->add_option("--sysfs-root", check.sysfs_root,
                        "Directory holding devices/system/node for the memory probe (default: "
                        "$TRELLIS_SYSFS_ROOT with %n replaced by the node name, else /sys)");
  check_cmd->add_option("--expect-gpus", check.expect_gpus,
                        "GPUs a node of the partition has (its GRES); fewer visible fail the "
                        "check; 0: not checked")
      ->capture_default_str();
  check_cmd->add_flag("--certify", check.certify,
                      "The check of a node leaving the controller's quarantine: also touch "
                      "memory on each NUMA node and compute known answers on the CPU; the last "
                      "line sums it up (certify: passed / certify: FAILED: ...)");
  check_cmd->add_option("--touch-gib", check.touch_gib,
                        "With --certify: GiB touched on each NUMA node (0: none)")
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // trellis doctor reads bad flags of `check` as exit 2, as a failed validation.
    return code != 0 && check_cmd->parsed() ? trellis::kExitUsage : code;
  }
  trellis::InitLogging("trellis-worker", log_level);
  // Its timer thread starts with the first timer, after the touch probe's fork.
  trellis::SystemClock clock;

  if (agent_cmd->parsed()) {
    if (agent.id.node.empty()) agent.id.node = trellis::worker::DefaultNodeName();
    if (absl::Status st = trellis::worker::ValidateAgentArgs(agent); !st.ok()) {
      spdlog::error("{}", std::string(st.message()));
      return trellis::kExitUsage;
    }
    return trellis::worker::RunAgent(agent, clock);
  }
  if (standby_cmd->parsed()) {
    if (standby.node.empty()) standby.node = trellis::worker::DefaultNodeName();
    if (absl::Status st = trellis::worker::ValidateStandbyArgs(standby); !st.ok()) {
      spdlog::error("{}", std::string(st.message()));
      return trellis::kExitUsage;
    }
    return trellis::worker::RunStandby(standby, clock);
  }
  if (check_cmd->parsed()) {
    if (absl::Status st = trellis::worker::ValidateCheckArgs(check); !st.ok()) {
      spdlog::error("{}", std::string(st.message()));
      return trellis::kExitUsage;
    }
    return trellis::worker::RunCheck(check, clock);
  }
  if (next.id.node.empty()) next.id.node = trellis::worker::DefaultNodeName();
  if (absl::Status st = trellis::worker::ValidateNextLaunchArgs(next); !st.ok()) {
    // The batch script still needs a line it can act on.
    spdlog::error("{}", std::string(st.message()));
    std::cout << "exit "
              << (next.step_exit_code >= 0 && next.step_exit_code <= 255 ? next.step_exit_code : 1)
              << std::endl;
    return trellis::kExitUsage;
  }
  return trellis::worker::RunNextLaunch(next, clock);
}
