// trellis-controller: parses its flags and wires the parts. See controller/app
// for the behaviour and controller/shell for the checks before serving.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>

#include "common/controller_address.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "common/metrics_server.h"
#include "common/version.h"
#include "controller/app/controller.h"
#include "controller/app/kill_after_sbatch_client.h"
#include "controller/rpc/agent_service.h"
#include "controller/rpc/controller_service.h"
#include "controller/rpc/final_report_file.h"
#include "controller/rpc/step_spool_file.h"
#include "controller/shell/config_file.h"
#include "controller/shell/flags.h"
#include "controller/shell/grpc_serving.h"
#include "controller/shell/lease.h"
#include "controller/shell/site_check.h"
#include "controller/shell/port_file.h"
#include "controller/shell/socket_path.h"
#include "controller/shell/startup_checks.h"

namespace trellis::controller {
namespace {

// Logs a failed start-up step and gives the exit code of a usage error.
int UsageError(const absl::Status& st, const std::string& prefix = "") {
  spdlog::error("{}{}", prefix, std::string(st.message()));
  return kExitUsage;
}

int Run(ControllerFlags& flags) {
  InitLogging("controller", flags.log_level);
  // Everything the controller writes (database, run directories, specs,
  // secrets, batch scripts; the jobs inherit it too) is its owner's alone.
  umask(077);
  auto security = CheckTcpSecurity(flags);
  if (!security.ok()) return UsageError(security.status());
  auto access = LoadUserAccess(flags);
  if (!access.ok()) return UsageError(access.status());
  if (absl::Status st = SettleStateDir(flags); !st.ok()) return UsageError(st);
  const std::string host = flags.test_hostname.empty() ? ThisHostName() : flags.test_hostname;
  if (flags.check) {
    if (absl::Status st = SettlePaths(flags, *security); !st.ok()) return UsageError(st);
    return RunSiteCheck(flags, host);
  }
  // The lease first: a controller that does not hold the state directory
  // touches nothing else (the socket, the store, the address file).
  std::string lease_said;
  auto lease = StateLease::Acquire(
      {flags.state_dir + "/controller.lease", host, std::string(kVersion),
       std::chrono::seconds(flags.lease_ttl_s)},
      &lease_said, [](const std::string& waiting) { spdlog::info("{}", waiting); });
  if (!lease.ok()) {
    spdlog::error("{}", std::string(lease.status().message()));
    return absl::IsAlreadyExists(lease.status()) ? kExitStateHeld : kExitUsage;
  }
  spdlog::info("{}", lease_said);
  if (absl::Status st = PrepareSocketPath(flags.socket_path); !st.ok())
    return UsageError(st, "--socket: ");
  if (absl::Status st = SettlePaths(flags, *security); !st.ok()) return UsageError(st);
  // Bound before anything else starts, so that a taken address stops the
  // program at once.
  std::unique_ptr<trellis::MetricsServer> metrics_server;
  if (flags.metrics_listen != "off") {
    auto server = trellis::MetricsServer::Start(flags.metrics_listen);
    if (!server.ok()) return UsageError(server.status(), "--metrics-listen ");
    metrics_server = std::move(*server);
  }
  ControllerConfig config = ConfigFromFlags(flags);
  config.read_final_report = ReadFinalReportFile;
  config.read_step_spool = ReadStepSpoolFile;
  auto sbatch_template = SbatchTemplate(flags);
  if (!sbatch_template.ok()) return UsageError(sbatch_template.status());
  config.sbatch_template = *sbatch_template;
  const StoreJournal journal =
      ChooseStoreJournal(flags.db_journal, flags.db_path, FilesystemOf(flags.db_path));
  spdlog::info("{}", journal.said);
  // Every commit first asks whether this controller still holds the lease.
  auto store = Store::Open(flags.db_path, journal.journal,
                           [held = lease->get()] { return held->Held(); });
  if (!store.ok()) return UsageError(store.status());
  std::shared_ptr<SlurmClient> slurm = std::make_shared<SlurmCliClient>(SlurmOptions(flags));
  // The test-only --test-kill-after-sbatch wraps the Slurm client, here and only here.
  if (flags.test_kill_after_sbatch)
    slurm = std::make_shared<KillAfterSbatchClient>(std::move(slurm));

  // Signals are taken by a dedicated wait below, never by other threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A controller that lost its lease stops as on SIGTERM (its writes were
  // refused from the moment it could not renew), and exits 1.
  (*lease)->StartRenewing([](const std::string&) { kill(getpid(), SIGTERM); });

  SystemClock clock;
  Controller controller(config, std::move(*store), slurm, &clock);
  if (metrics_server) metrics_server->Serve(controller.metrics().registry());
  ControllerServiceImpl user_api(
      &controller, Authenticator(auth::OwnerName(), access->owner_token, flags.token_file,
                                 std::move(access->team)));
  // `trellis doctor`: the site checks with this controller's flags, the node
  // dialling what workers dial (the address file, written once serving).
  user_api.SetDoctor([&flags, &host](
                         const std::string& spec) -> absl::StatusOr<std::vector<CheckLine>> {
    auto announced = ReadControllerAddress(ControllerAddressPath(flags.state_dir));
    std::vector<CheckLine> lines = {StoreLine(flags), LeaseLine(flags.state_dir, host)};
    auto in = DoctorInputsFor(flags, spec, announced.ok() ? announced->address : "", &lines);
    if (!in.ok()) return in.status();
    for (CheckLine& l : RunDoctor(*in)) lines.push_back(std::move(l));
    return lines;
  });
  AgentServiceImpl agent_api(&controller);
  auto serving = ServeGrpc(flags.listen, *security, flags.socket_path, {&user_api, &agent_api});
  if (!serving.ok()) return UsageError(serving.status());
  std::string advertise = flags.advertise.empty()
                              ? DefaultAdvertiseAddress(flags.listen, serving->port)
                              : flags.advertise;
  // The workers' address must be known before any attempt is rendered.
  controller.SetAdvertiseAddress(advertise);
  const std::string address_file = ControllerAddressPath(flags.state_dir);
  controller.SetControllerFile(address_file);
  if (absl::Status st = WriteControllerAddress(
          address_file, AddressAnnounced(advertise, host, config.worker_tls_ca));
      !st.ok())
    spdlog::error("workers of running jobs cannot follow this controller: {}",
                  std::string(st.message()));
  if (absl::Status st = controller.Start(); !st.ok()) {
    serving->server->Shutdown();
    return UsageError(st);
  }
  spdlog::info(
      "trellis-controller {} serving on port {} ({}; workers dial {}) and {}, db {}, "
      "output root {}",
      kVersion, serving->port, security->tls ? "TLS" : "plain TCP", advertise, flags.socket_path,
      flags.db_path, config.output_root);
  if (metrics_server) {
    std::string host = flags.metrics_listen.substr(0, flags.metrics_listen.rfind(':'));
    spdlog::info("metrics on http://{}:{}/metrics", host, metrics_server->port());
  }
  auto write_port = [](const std::string& file, int port) {
    if (absl::Status st = WritePortFile(file, port); !st.ok())
      spdlog::error("{}", std::string(st.message()));
  };
  write_port(flags.port_file, serving->port);
  if (metrics_server) write_port(flags.metrics_port_file, metrics_server->port());

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: shutting down", sig);
  controller.BeginShutdown();
  serving->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  controller.Stop();
  unlink(flags.socket_path.c_str());
  return (*lease)->lost() ? kExitError : kExitOk;
}

}  // namespace
}  // namespace trellis::controller

int main(int argc, char** argv) {
  CLI::App app{"trellis-controller: schedules, gates and watches Trellis runs on Slurm"};
  trellis::controller::ControllerFlags flags;
  trellis::controller::AddControllerFlags(app, flags);
  app.set_version_flag("--version", std::string(trellis::kVersion));
  std::vector<std::string> given(argv + 1, argv + argc);
  if (std::find(given.begin(), given.end(), "--config-reference") != given.end()) {
    std::cout << trellis::controller::ConfigReference(app);
    return 0;
  }
  // --config FILE's keys as flags before the command line's, which win.
  auto args = trellis::controller::ArgsWithConfigFile(app, given);
  if (!args.ok()) {
    std::cerr << "trellis-controller: " << args.status().message() << "\n";
    return trellis::kExitUsage;
  }
  std::reverse(args->begin(), args->end());  // CLI11 takes them last first
  try {
    app.parse(*args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return trellis::controller::Run(flags);
}
