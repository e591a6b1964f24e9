#pragma once
// trellis-controller's command line: every flag, its default and its help.
// Parsed into ControllerFlags; ConfigFromFlags turns the plain numbers into
// the ControllerConfig's typed figures.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "controller/app/loop_context.h"

namespace trellis::controller {

struct ControllerFlags {
  ControllerConfig config;  // the fields a flag sets as they are
  std::string listen = "127.0.0.1:50151";
  std::string advertise;
  std::string socket_path;  // default: auth::DefaultSocketPath()
  std::string token_file;   // default: auth::DefaultTokenPath()
  std::string tokens_file;
  std::string tls_cert, tls_key, tls_ca;
  bool insecure_tcp = false;
  std::string state_dir;  // default: --db's directory
  std::string db_path;    // default: <state_dir>/trellis.db
  int64_t lease_ttl_s = 15;
  std::string db_journal = "auto";  // auto, wal, rollback
  std::string template_file;
  std::string slurm_bin_dir;
  int slurm_timeout_s = 30;
  int schedule_ms = 1000;
  int reconcile_ms = 5000;
  int unschedulable_after_s = 3600;
  int64_t quarantine_s = 3600;
  int64_t quarantine_max_s = 7 * 86400;
  int64_t probation_s = 86400;
  bool certify_return = true;
  int64_t certify_timeout_s = 600;
  std::string metrics_listen = "127.0.0.1:9152";
  std::string port_file;
  std::string metrics_port_file;
  int64_t steps_keep_full = StepRetention{}.keep_full;
  int64_t steps_thin_every = StepRetention{}.thin_every;
  std::string log_level = "info";
  std::string config_file;  // --config: read by ArgsWithConfigFile before the parse
  bool check = false;       // --check: the site checks, printed, then exit
  // For tests only (tests/e2e/crash_after_sbatch.sh); not in --help.
  bool test_kill_after_sbatch = false;
  std::string test_hostname;  // the lease's and address file's host, to fake a takeover
};

void AddControllerFlags(CLI::App& app, ControllerFlags& flags);

// flags.config with the flags given as plain numbers (intervals, quarantine
// times, step retention) set. The sbatch template, the advertised address and
// the paths the checks settle are set by the caller.
ControllerConfig ConfigFromFlags(const ControllerFlags& flags);

}  // namespace trellis::controller
