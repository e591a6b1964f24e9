#include "controller/shell/startup_checks.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/atomic_file.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/version.h"
#include "common/status.h"
#include "common/tls.h"
#include "controller/app/sbatch_template.h"

namespace trellis::controller {
namespace {

namespace fs = std::filesystem;

std::string SelfDir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "." : self.parent_path().string();
}

}  // namespace

absl::StatusOr<TcpSecurity> CheckTcpSecurity(const ControllerFlags& flags) {
  if (flags.tls_cert.empty() != flags.tls_key.empty() ||
      (!flags.tls_ca.empty() && flags.tls_cert.empty()))
    return absl::InvalidArgumentError(
        "TLS needs both --tls-cert and --tls-key (and --tls-ca only with them)");
  TcpSecurity security;
  security.tls = !flags.tls_cert.empty();
  if (!security.tls) {
    if (!auth::IsLoopbackListen(flags.listen) && !flags.insecure_tcp)
      return absl::InvalidArgumentError(
          "--listen " + flags.listen +
          ": beyond loopback without TLS, specs, logs, tokens and worker secrets would cross "
          "the network in clear; give --tls-cert and --tls-key (deploy/tls/make-self-signed.sh "
          "makes a pair), listen on 127.0.0.1, or pass --insecure-tcp on a network you trust");
    security.credentials = grpc::InsecureServerCredentials();
    return security;
  }
  auto credentials = tls::ServerCredentials({flags.tls_cert, flags.tls_key});
  const bool own_ca = flags.tls_ca.empty();
  auto ca = tls::ReadPem(own_ca ? "--tls-cert" : "--tls-ca", own_ca ? flags.tls_cert : flags.tls_ca,
                         "CERTIFICATE");
  RETURN_IF_ERROR(credentials.status());
  RETURN_IF_ERROR(ca.status());
  security.credentials = *credentials;
  security.worker_ca_pem = *ca;
  return security;
}

absl::StatusOr<UserAccess> LoadUserAccess(const ControllerFlags& flags) {
  UserAccess access;
  auto token = auth::LoadToken(flags.token_file, /*create=*/true);
  if (!token.ok())
    return absl::InvalidArgumentError("--token-file: " + std::string(token.status().message()));
  access.owner_token = *token;
  if (!flags.tokens_file.empty()) {
    auto team = auth::LoadTokensFile(flags.tokens_file);
    if (!team.ok())
      return absl::InvalidArgumentError("--tokens-file: " + std::string(team.status().message()));
    access.team = std::move(*team);
    spdlog::info("--tokens-file {}: {} team member(s)", flags.tokens_file, access.team.size());
  }
  return access;
}

absl::Status SettleStateDir(ControllerFlags& flags) {
  if (flags.state_dir.empty() && flags.db_path.empty())
    return absl::InvalidArgumentError(
        "give --state-dir (a directory for the database, the lease and the address file) or "
        "--db (the database file, whose directory is then the state directory)");
  std::error_code ec;
  auto absolute = [&](const std::string& p) {
    return fs::absolute(p, ec).lexically_normal().string();
  };
  if (flags.state_dir.empty()) {
    flags.db_path = absolute(flags.db_path);
    flags.state_dir = fs::path(flags.db_path).parent_path().string();
  } else {
    const bool output_given = !flags.config.output_root.empty();
    flags.state_dir = absolute(flags.state_dir);
    if (flags.db_path.empty()) flags.db_path = flags.state_dir + "/trellis.db";
    flags.db_path = absolute(flags.db_path);
    if (!output_given) flags.config.output_root = flags.state_dir + "/runs";
  }
  if (flags.config.output_root.empty())
    return absl::InvalidArgumentError(
        "--output-root is required with --db (with --state-dir it defaults to its runs/)");
  fs::create_directories(flags.state_dir, ec);
  if (ec || access(flags.state_dir.c_str(), W_OK) != 0)
    return absl::InvalidArgumentError("--state-dir " + flags.state_dir +
                                      ": not a writable directory");
  return absl::OkStatus();
}

absl::Status SettlePaths(ControllerFlags& flags, const TcpSecurity& security) {
  ControllerConfig& config = flags.config;
  std::error_code ec;
  config.output_root = fs::absolute(config.output_root, ec).lexically_normal().string();
  fs::create_directories(config.output_root, ec);
  if (ec || access(config.output_root.c_str(), W_OK) != 0)
    return absl::InvalidArgumentError("--output-root " + config.output_root +
                                      ": not a writable directory");
  if (security.tls) {
    // Where the compute nodes read it: the output root is shared with them.
    config.worker_tls_ca = config.output_root + "/controller-ca.pem";
    if (absl::Status st = WriteFileAtomically(config.worker_tls_ca, security.worker_ca_pem, 0600);
        !st.ok())
      return absl::InvalidArgumentError("--output-root: " + std::string(st.message()));
  }
  for (const std::string& root : config.data_roots) {
    if (root.empty() || root[0] != '/')
      return absl::InvalidArgumentError("--data-root " + root + ": must be an absolute path");
  }
  if (config.worker_bin.empty()) config.worker_bin = SelfDir() + "/trellis-worker";
  if (config.worker_bin[0] != '/')
    return absl::InvalidArgumentError("--worker-bin " + config.worker_bin +
                                      ": must be an absolute path");
  if (!config.prometheus_sd_file.empty()) {
    fs::path dir = fs::absolute(config.prometheus_sd_file, ec).parent_path();
    if (ec || !fs::is_directory(dir, ec) || access(dir.c_str(), W_OK) != 0)
      return absl::InvalidArgumentError("--prometheus-sd-file " + config.prometheus_sd_file + ": " +
                                        dir.string() + " is not a writable directory");
  }
  return absl::OkStatus();
}

SlurmCliOptions SlurmOptions(const ControllerFlags& flags) {
  SlurmCliOptions options{flags.slurm_bin_dir, std::chrono::seconds(flags.slurm_timeout_s), false};
  options.accounting = SlurmCliClient::DetectAccounting(options);
  spdlog::info("Slurm accounting {}",
               options.accounting ? "available: using sacct" : "not configured: squeue/scontrol");
  return options;
}

ControllerAddress AddressAnnounced(const std::string& advertise, const std::string& host,
                                   const std::string& worker_tls_ca) {
  ControllerAddress a;
  a.address = advertise;
  a.host = host;
  a.pid = getpid();
  a.version = kVersion;
  a.started_unix = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  if (!worker_tls_ca.empty()) {
    std::ifstream in(worker_tls_ca);
    std::stringstream pem;
    pem << in.rdbuf();
    a.tls_ca = worker_tls_ca;
    a.tls_ca_sha256 = Sha256Hex(pem.str());
  }
  return a;
}

absl::StatusOr<std::string> SbatchTemplate(const ControllerFlags& flags) {
  if (flags.template_file.empty()) return std::string(kSbatchTemplate);
  std::ifstream in(flags.template_file);
  if (!in)
    return absl::InvalidArgumentError("--sbatch-template " + flags.template_file +
                                      ": cannot read it");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

StoreJournal ChooseStoreJournal(const std::string& flag, const std::string& db_path,
                                const absl::StatusOr<FilesystemKind>& fs) {
  const std::string where =
      fs.ok() ? "on " + fs->name + (fs->network ? ", a network filesystem" : ", local")
              : "on a filesystem statfs could not tell (" + std::string(fs.status().message()) +
                    ")";
  if (flag == "wal")
    return {sqlite::Journal::kWal, "db " + db_path + " " + where + ": WAL (--db-journal wal)"};
  if (flag == "rollback")
    return {sqlite::Journal::kRollback,
            "db " + db_path + " " + where + ": rollback journal (--db-journal rollback)"};
  if (fs.ok() && fs->network)
    return {sqlite::Journal::kRollback,
            "db " + db_path + " " + where + ": rollback journal (WAL's shared memory is one "
            "host's; --db-journal wal to force it)"};
  return {sqlite::Journal::kWal, "db " + db_path + " " + where + ": WAL"};
}

}  // namespace trellis::controller
