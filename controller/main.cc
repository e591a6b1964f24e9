// trellis-controller: wiring only. See controller/app for the behaviour.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/auth.h"
#include "common/exit_codes.h"
#include "common/status.h"
#include "common/tls.h"
#include "common/log.h"
#include "common/version.h"
#include "controller/app/controller.h"
#include "controller/app/metrics.h"
#include "controller/app/sbatch_template.h"
#include "controller/rpc/agent_service.h"
#include "controller/rpc/controller_service.h"
#include "controller/app/kill_after_sbatch_client.h"
#include "controller/slurm/slurm_cli_client.h"

namespace fs = std::filesystem;
using namespace trellis;
using namespace trellis::controller;

namespace {

std::string SelfDir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "." : self.parent_path().string();
}

// The socket's directory is made private; a socket left by a controller that
// died is removed, one that answers belongs to a running controller.
absl::Status PrepareSocket(const std::string& path) {
  RETURN_IF_ERROR(auth::CheckSocketPath(path));
  RETURN_IF_ERROR(auth::EnsurePrivateDir(fs::path(path).parent_path().string()));
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode))
    return absl::FailedPreconditionError(path + " exists and is not a socket");
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  if (live)
    return absl::FailedPreconditionError(path + " is served by a running controller; stop it or "
                                         "give this one another --socket");
  unlink(path.c_str());
  return absl::OkStatus();
}

std::string HostName() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"trellis-controller: schedules, gates and watches Trellis runs on Slurm"};
  ControllerConfig config;
  std::string listen = "127.0.0.1:50151", advertise, db_path, port_file, template_file;
  std::string log_level = "info", slurm_bin_dir;
  int schedule_ms = 1000, reconcile_ms = 5000, slurm_timeout_s = 30;
  app.add_option("--listen", listen,
                 "host:port to serve gRPC on for workers, and for users with a token "
                 "(port 0: any free port); beyond loopback only with --insecure-tcp")
      ->capture_default_str();
  std::string socket_path = auth::DefaultSocketPath();
  app.add_option("--socket", socket_path,
                 "unix socket for the CLI, in a directory only this user can enter (made 0700)")
      ->capture_default_str();
  std::string token_file = auth::DefaultTokenPath();
  app.add_option("--token-file", token_file,
                 "this user's token for the user API over TCP (created 0600 when missing)")
      ->capture_default_str();
  std::string tokens_file;
  app.add_option("--tokens-file", tokens_file,
                 "a team's tokens, one '<token> <name> <role>' a line (role user or admin): users "
                 "see and act on their own runs, admins on all and on nodes; 0600");
  std::string tls_cert, tls_key, tls_ca;
  app.add_option("--tls-cert", tls_cert,
                 "PEM certificate (chain) to serve TLS with on --listen; with --tls-key. "
                 "deploy/tls/make-self-signed.sh makes a pair");
  app.add_option("--tls-key", tls_key, "PEM private key of --tls-cert (mode 0600)");
  app.add_option("--tls-ca", tls_ca,
                 "CA certificate the workers verify --tls-cert with (default: --tls-cert "
                 "itself, right for a self-signed pair); copied under --output-root for them");
  bool insecure_tcp = false;
  app.add_flag("--insecure-tcp", insecure_tcp,
               "listen beyond loopback without TLS: specs, logs and worker secrets cross the "
               "network in clear; only on a network you trust");
  app.add_option("--advertise", advertise,
                 "host:port workers on compute nodes dial (default: this host and the bound port)");
  app.add_option("--db", db_path, "SQLite database file, on local disk (not NFS/Lustre)")
      ->required();
  app.add_option("--output-root", config.output_root,
                 "directory (shared with the compute nodes) that holds every run directory")
      ->required();
  app.add_option("--data-root", config.data_roots,
                 "a [model] run's training.data must lie under one of these, links and '..' "
                 "resolved (repeatable; default: this user's home directory and --output-root)");
  app.add_option("--worker-bin", config.worker_bin,
                 "absolute path of trellis-worker as seen from the compute nodes "
                 "(default: next to this binary)");
  app.add_option("--partition", config.default_partition,
                 "partition for runs whose spec names none (default: Slurm's default)");
  app.add_option("--schedule-interval-ms", schedule_ms, "scheduler period")->capture_default_str();
  app.add_option("--reconcile-interval-ms", reconcile_ms, "Slurm reconciliation period")
      ->capture_default_str();
  app.add_option("--slurm-bin-dir", slurm_bin_dir, "directory of sbatch/squeue/... (default: PATH)");
  app.add_option("--slurm-timeout-s", slurm_timeout_s, "timeout of one Slurm command")
      ->capture_default_str();
  app.add_option("--sbatch-template", template_file,
                 "batch-script template replacing the built-in deploy/slurm/trellis.sbatch.in");
  app.add_option("--master-port-base", config.master_port,
                 "first rendezvous port handed to rank 0 (a per-launch offset below 2000 is added)")
      ->capture_default_str();
  int64_t quarantine_s = 3600, quarantine_max_s = 7 * 86400, probation_s = 86400;
  app.add_option("--quarantine-s", quarantine_s,
                 "how long a node's first strike keeps it out; each further strike doubles it")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{365} * 86400));
  app.add_option("--quarantine-max-s", quarantine_max_s, "the longest automatic quarantine")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{365} * 86400));
  app.add_option("--probation-s", probation_s,
                 "after a quarantine ends, how long a node stays on probation (a strike then "
                 "doubles the time; after it, strikes are forgiven)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{365} * 86400));
  app.add_flag("--slurm-can-drain", config.can_drain,
               "also drain quarantined nodes with scontrol (needs Slurm operator rights)");
  std::string metrics_listen = "127.0.0.1:9152";
  app.add_option("--metrics-listen", metrics_listen,
                 "host:port to serve Prometheus /metrics on (an IP address; port 0: any free "
                 "port; off: no metrics)")
      ->capture_default_str();
  app.add_option("--prometheus-sd-file", config.prometheus_sd_file,
                 "write the live workers' /metrics addresses here, for Prometheus's file-based "
                 "service discovery (default: none)");
  app.add_option("--port-file", port_file, "write the bound port to this file once serving");
  std::string metrics_port_file;
  app.add_option("--metrics-port-file", metrics_port_file,
                 "write the bound /metrics port to this file once serving");
  int64_t steps_keep_full = config.step_retention.keep_full;
  int64_t steps_thin_every = config.step_retention.thin_every;
  app.add_option("--steps-keep-full", steps_keep_full,
                 "step retention: every step of a run's newest N steps is kept")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--steps-thin-every", steps_thin_every,
                 "step retention: of older steps, those that are a multiple of M are kept "
                 "(and each launch's first and last)")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")->capture_default_str();
  // For tests only (tests/e2e/crash_after_sbatch.sh); not in --help.
  bool test_kill_after_sbatch = false;
  app.add_flag("--test-kill-after-sbatch", test_kill_after_sbatch)->group("");
  app.set_version_flag("--version", std::string(kVersion));
  CLI11_PARSE(app, argc, argv);

  InitLogging("controller", log_level);
  // Everything the controller writes (database, run directories, specs,
  // secrets, batch scripts; the jobs inherit it too) is its owner's alone.
  umask(077);
  std::error_code ec;
  if (tls_cert.empty() != tls_key.empty() || (!tls_ca.empty() && tls_cert.empty())) {
    spdlog::error("TLS needs both --tls-cert and --tls-key (and --tls-ca only with them)");
    return kExitUsage;
  }
  const bool tls = !tls_cert.empty();
  if (!tls && !auth::IsLoopbackListen(listen) && !insecure_tcp) {
    spdlog::error("--listen {}: beyond loopback without TLS, specs, logs, tokens and worker "
                  "secrets would cross the network in clear; give --tls-cert and --tls-key "
                  "(deploy/tls/make-self-signed.sh makes a pair), listen on 127.0.0.1, or pass "
                  "--insecure-tcp on a network you trust",
                  listen);
    return kExitUsage;
  }
  std::shared_ptr<grpc::ServerCredentials> tcp_credentials = grpc::InsecureServerCredentials();
  std::string worker_ca_pem;
  if (tls) {
    auto credentials = tls::ServerCredentials({tls_cert, tls_key});
    auto ca = tls::ReadPem(tls_ca.empty() ? "--tls-cert" : "--tls-ca",
                           tls_ca.empty() ? tls_cert : tls_ca, "CERTIFICATE");
    for (const absl::Status& st : {credentials.status(), ca.status()}) {
      if (!st.ok()) {
        spdlog::error("{}", std::string(st.message()));
        return kExitUsage;
      }
    }
    tcp_credentials = *credentials;
    worker_ca_pem = *ca;
  }
  auto token = auth::LoadToken(token_file, /*create=*/true);
  if (!token.ok()) {
    spdlog::error("--token-file: {}", std::string(token.status().message()));
    return kExitUsage;
  }
  std::vector<auth::TeamMember> team;
  if (!tokens_file.empty()) {
    auto loaded = auth::LoadTokensFile(tokens_file);
    if (!loaded.ok()) {
      spdlog::error("--tokens-file: {}", std::string(loaded.status().message()));
      return kExitUsage;
    }
    team = std::move(*loaded);
    spdlog::info("--tokens-file {}: {} team member(s)", tokens_file, team.size());
  }
  if (absl::Status st = PrepareSocket(socket_path); !st.ok()) {
    spdlog::error("--socket: {}", std::string(st.message()));
    return kExitUsage;
  }
  config.output_root = fs::absolute(config.output_root, ec).lexically_normal().string();
  fs::create_directories(config.output_root, ec);
  if (ec || access(config.output_root.c_str(), W_OK) != 0) {
    spdlog::error("--output-root {}: not a writable directory", config.output_root);
    return kExitUsage;
  }
  if (tls) {
    // Where the compute nodes read it: the output root is shared with them.
    config.worker_tls_ca = config.output_root + "/controller-ca.pem";
    if (absl::Status st = WriteFileAtomically(config.worker_tls_ca, worker_ca_pem, 0600);
        !st.ok()) {
      spdlog::error("--output-root: {}", std::string(st.message()));
      return kExitUsage;
    }
  }
  for (const std::string& root : config.data_roots) {
    if (root.empty() || root[0] != '/') {
      spdlog::error("--data-root {}: must be an absolute path", root);
      return kExitUsage;
    }
  }
  if (config.worker_bin.empty()) config.worker_bin = SelfDir() + "/trellis-worker";
  if (config.worker_bin[0] != '/') {
    spdlog::error("--worker-bin {}: must be an absolute path", config.worker_bin);
    return kExitUsage;
  }
  if (!config.prometheus_sd_file.empty()) {
    fs::path dir = fs::absolute(config.prometheus_sd_file, ec).parent_path();
    if (ec || !fs::is_directory(dir, ec) || access(dir.c_str(), W_OK) != 0) {
      spdlog::error("--prometheus-sd-file {}: {} is not a writable directory",
                    config.prometheus_sd_file, dir.string());
      return kExitUsage;
    }
  }
  // Bound before anything else starts, so that a taken address stops the
  // program at once.
  std::unique_ptr<MetricsServer> metrics_server;
  if (metrics_listen != "off") {
    auto server = MetricsServer::Start(metrics_listen);
    if (!server.ok()) {
      spdlog::error("--metrics-listen {}", std::string(server.status().message()));
      return kExitUsage;
    }
    metrics_server = std::move(*server);
  }
  config.sbatch_template = kSbatchTemplate;
  if (!template_file.empty()) {
    std::ifstream in(template_file);
    if (!in) {
      spdlog::error("--sbatch-template {}: cannot read it", template_file);
      return kExitUsage;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    config.sbatch_template = ss.str();
  }
  config.quarantine.base_duration = std::chrono::seconds(quarantine_s);
  config.quarantine.max_duration = std::chrono::seconds(quarantine_max_s);
  config.quarantine.probation = std::chrono::seconds(probation_s);
  config.schedule_interval = std::chrono::milliseconds(schedule_ms);
  config.step_retention = {steps_keep_full, steps_thin_every};
  config.reconcile_interval = std::chrono::milliseconds(reconcile_ms);

  auto store = Store::Open(db_path);
  if (!store.ok()) {
    spdlog::error("{}", std::string(store.status().message()));
    return kExitUsage;
  }
  SlurmCliOptions slurm_options{slurm_bin_dir, std::chrono::seconds(slurm_timeout_s), false};
  slurm_options.accounting = SlurmCliClient::DetectAccounting(slurm_options);
  spdlog::info("Slurm accounting {}", slurm_options.accounting ? "available: using sacct"
                                                               : "not configured: squeue/scontrol");

  // Signals are taken by a dedicated wait below, never by other threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  SystemClock clock;
  std::shared_ptr<SlurmClient> slurm = std::make_shared<SlurmCliClient>(slurm_options);
  if (test_kill_after_sbatch) slurm = std::make_shared<KillAfterSbatchClient>(std::move(slurm));
  Controller controller(config, std::move(*store), std::move(slurm), &clock);
  if (metrics_server) metrics_server->Serve(controller.metrics().registry());
  ControllerServiceImpl user_api(
      &controller, Authenticator(auth::OwnerName(), *token, token_file, std::move(team)));
  AgentServiceImpl agent_api(&controller);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, tcp_credentials, &port);
  builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
  builder.RegisterService(&user_api);
  builder.RegisterService(&agent_api);
  builder.SetMaxReceiveMessageSize(4 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    spdlog::error("--listen {}: cannot bind{}", listen,
                  tls ? " (or the TLS pair is unusable: does --tls-key belong to --tls-cert?)"
                      : "");
    return kExitUsage;
  }
  if (advertise.empty()) {
    std::string host = listen.substr(0, listen.rfind(':'));
    if (host == "0.0.0.0" || host == "[::]" || host.empty()) host = HostName();
    advertise = host + ":" + std::to_string(port);
  }
  // The workers' address must be known before any attempt is rendered.
  controller.SetAdvertiseAddress(advertise);
  if (absl::Status st = controller.Start(); !st.ok()) {
    spdlog::error("{}", std::string(st.message()));
    server->Shutdown();
    return kExitUsage;
  }
  spdlog::info("trellis-controller {} serving on port {} ({}; workers dial {}) and {}, db {}, "
               "output root {}",
               kVersion, port, tls ? "TLS" : "plain TCP", advertise, socket_path, db_path,
               config.output_root);
  if (metrics_server) {
    std::string host = metrics_listen.substr(0, metrics_listen.rfind(':'));
    spdlog::info("metrics on http://{}:{}/metrics", host, metrics_server->port());
  }
  auto write_port = [&ec](const std::string& file, int value) {
    if (file.empty()) return;
    std::ofstream(file + ".tmp") << value << "\n";
    fs::rename(file + ".tmp", file, ec);
  };
  write_port(port_file, port);
  if (metrics_server) write_port(metrics_port_file, metrics_server->port());

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: shutting down", sig);
  controller.BeginShutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  controller.Stop();
  unlink(socket_path.c_str());
  return 0;
}
