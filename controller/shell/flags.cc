#include "controller/shell/flags.h"

#include "common/auth.h"

namespace trellis::controller {

void AddControllerFlags(CLI::App& app, ControllerFlags& flags) {
  flags.socket_path = auth::DefaultSocketPath();
  flags.token_file = auth::DefaultTokenPath();
  app.add_option("--listen", flags.listen,
                 "host:port to serve gRPC on for workers, and for users with a token "
                 "(port 0: any free port); beyond loopback only with --insecure-tcp")
      ->capture_default_str();
  app.add_option("--socket", flags.socket_path,
                 "unix socket for the CLI, in a directory only this user can enter (made 0700)")
      ->capture_default_str();
  app.add_option("--token-file", flags.token_file,
                 "this user's token for the user API over TCP (created 0600 when missing)")
      ->capture_default_str();
  app.add_option("--tokens-file", flags.tokens_file,
                 "a team's tokens, one '<token> <name> <role>' a line (role user or admin): users "
                 "see and act on their own runs, admins on all and on nodes; 0600");
  app.add_option("--tls-cert", flags.tls_cert,
                 "PEM certificate (chain) to serve TLS with on --listen; with --tls-key. "
                 "deploy/tls/make-self-signed.sh makes a pair");
  app.add_option("--tls-key", flags.tls_key, "PEM private key of --tls-cert (mode 0600)");
  app.add_option("--tls-ca", flags.tls_ca,
                 "CA certificate the workers verify --tls-cert with (default: --tls-cert "
                 "itself, right for a self-signed pair); copied under --output-root for them");
  app.add_flag("--insecure-tcp", flags.insecure_tcp,
               "listen beyond loopback without TLS: specs, logs and worker secrets cross the "
               "network in clear; only on a network you trust");
  app.add_option("--advertise", flags.advertise,
                 "host:port workers on compute nodes dial (default: this host and the bound port)");
  app.add_option("--state-dir", flags.state_dir,
                 "the controller's state: its database (trellis.db), its lease (one controller "
                 "per state directory: another refuses to start while it is held) and its "
                 "address file (where workers and the CLI find it). On a shared filesystem a "
                 "controller on another host takes over once the lease expires. Default: "
                 "--db's directory");
  app.add_option("--db", flags.db_path,
                 "SQLite database file (default: <--state-dir>/trellis.db): on local disk, or on "
                 "a shared filesystem (NFS, Lustre) with the rollback journal (--db-journal)");
  app.add_option("--lease-ttl-s", flags.lease_ttl_s,
                 "the state directory's lease is renewed every third of this; a controller that "
                 "stopped renewing it this long may be replaced (a controller elsewhere watches "
                 "it this long again first, since clocks differ)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{600}));
  app.add_option("--db-journal", flags.db_journal,
                 "the database's journal: auto (WAL on local disk, the rollback journal on a "
                 "network filesystem, as statfs tells), wal, rollback")
      ->check(CLI::IsMember({"auto", "wal", "rollback"}))
      ->capture_default_str();
  app.add_option("--output-root", flags.config.output_root,
                 "directory (shared with the compute nodes) that holds every run directory "
                 "(default: <--state-dir>/runs)");
  app.add_option("--data-root", flags.config.data_roots,
                 "a [model] run's training.data must lie under one of these, links and '..' "
                 "resolved (repeatable; default: this user's home directory and --output-root)");
  app.add_option("--worker-bin", flags.config.worker_bin,
                 "absolute path of trellis-worker as seen from the compute nodes "
                 "(default: next to this binary)");
  app.add_option("--partition", flags.config.default_partition,
                 "partition for runs whose spec names none (default: Slurm's default)");
  app.add_option("--schedule-interval-ms", flags.schedule_ms, "scheduler period")
      ->capture_default_str();
  app.add_option("--reconcile-interval-ms", flags.reconcile_ms, "Slurm reconciliation period")
      ->capture_default_str();
  app.add_option("--unschedulable-after-s", flags.unschedulable_after_s,
                 "a run whose job Slurm keeps pending this long for a reason that does not "
                 "pass by itself (PartitionTimeLimit, ReqNodeNotAvail, AccountNotAllowed, ...) "
                 "fails, its job cancelled; 0: it waits")
      ->check(CLI::Range(0, 30 * 86400))
      ->capture_default_str();
  app.add_option("--notify-webhook", flags.config.notify_defaults.webhook,
                 "POST each run's events (end, failure, restart, handoff) and node quarantines "
                 "as JSON to this http(s) URL, for runs without [notify]")
      ->check([](const std::string& url) -> std::string {
        return url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0
                   ? ""
                   : "must be an http:// or https:// URL";
      });
  app.add_option("--notify-command", flags.config.notify_defaults.command,
                 "run this with /bin/sh -c on each run's events and node quarantines, the event "
                 "in TRELLIS_EVENT, TRELLIS_RUN_ID, TRELLIS_STATE, TRELLIS_REASON, TRELLIS_NODE "
                 "and TRELLIS_NOTIFICATION (JSON), for runs without [notify]");
  app.add_option("--slurm-bin-dir", flags.slurm_bin_dir,
                 "directory of sbatch/squeue/... (default: PATH)");
  app.add_option("--slurm-timeout-s", flags.slurm_timeout_s, "timeout of one Slurm command")
      ->capture_default_str();
  app.add_option("--sbatch-template", flags.template_file,
                 "batch-script template replacing the built-in deploy/slurm/trellis.sbatch.in");
  app.add_option("--master-port-base", flags.config.master_port,
                 "first rendezvous port handed to rank 0 (a per-launch offset below 2000 is added)")
      ->capture_default_str();
  app.add_option("--quarantine-s", flags.quarantine_s,
                 "how long a node's first strike keeps it out; each further strike doubles it")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{365} * 86400));
  app.add_option("--quarantine-max-s", flags.quarantine_max_s, "the longest automatic quarantine")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{365} * 86400));
  app.add_option("--probation-s", flags.probation_s,
                 "after a quarantine ends, how long a node stays on probation (a strike then "
                 "doubles the time; after it, strikes are forgiven)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{365} * 86400));
  app.add_flag("--certify-return,!--no-certify-return", flags.certify_return,
               "a node whose quarantine expired returns only once a check job on it passes "
               "(trellis-worker check --certify, or --certify-command); a failed check is a "
               "new strike; --no-certify-return: it returns at the expiry")
      ->default_str("true");
  app.add_option("--certify-command", flags.config.certify.command,
                 "the site's own check of a node leaving quarantine, run there with /bin/sh -c "
                 "in a Slurm job (exit 0: passed; its last output line is the summary); "
                 "default: trellis-worker check --certify");
  app.add_option("--certify-timeout-s", flags.certify_timeout_s,
                 "a check job with no result by then (queued or running) is cancelled and "
                 "counts as failed; also its --time")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{86400}));
  app.add_option("--certify-partition", flags.config.certify.partition,
                 "partition of the check jobs (default: --partition, else Slurm's default)");
  app.add_option("--certify-account", flags.config.certify.account,
                 "account of the check jobs (default: Slurm's default)");
  app.add_option("--certify-touch-gib", flags.config.certify.touch_gib,
                 "memory trellis-worker check --certify touches on each NUMA node, GiB")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1024.0));
  app.add_option("--node-mtbf-prior-hours", flags.config.node_mtbf_prior_hours,
                 "a node's mean time between failures before this controller has seen any "
                 "(one failure in this many node-hours, weighed with the failures seen); sets "
                 "checkpoint.every_steps = \"auto\"'s interval")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e7));
  app.add_flag("--slurm-can-drain", flags.config.can_drain,
               "also drain quarantined nodes with scontrol (needs Slurm operator rights)");
  app.add_option("--metrics-listen", flags.metrics_listen,
                 "host:port to serve Prometheus /metrics on (an IP address; port 0: any free "
                 "port; off: no metrics)")
      ->capture_default_str();
  app.add_option("--prometheus-sd-file", flags.config.prometheus_sd_file,
                 "write the live workers' /metrics addresses here, for Prometheus's file-based "
                 "service discovery (default: none)");
  app.add_option("--port-file", flags.port_file, "write the bound port to this file once serving");
  app.add_option("--metrics-port-file", flags.metrics_port_file,
                 "write the bound /metrics port to this file once serving");
  app.add_option("--steps-keep-full", flags.steps_keep_full,
                 "step retention: every step of a run's newest N steps is kept")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--steps-thin-every", flags.steps_thin_every,
                 "step retention: of older steps, those that are a multiple of M are kept "
                 "(and each launch's first and last)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  // Read before the flags are parsed (config_file.h): here for --help.
  app.add_option("--config", flags.config_file,
                 "TOML file of flags: each key a flag's long name (listen = \"...\", data-root = "
                 "[...]); flags on the command line win; docs/controller-config.md lists them");
  app.add_flag("--check", flags.check,
               "check the site as `trellis doctor` does (Slurm's commands and controller, munge, "
               "the partition and account, a compute node by srun, the store and its lease), "
               "one line each, and exit: 0 when none failed, 1 otherwise");
  app.add_flag("--config-reference",
               "print every key a --config file takes (type, default, what it sets) and exit");
  // For tests only (tests/e2e/crash_after_sbatch.sh); not in --help.
  app.add_flag("--test-kill-after-sbatch", flags.test_kill_after_sbatch)->group("");
  // For tests only (tests/e2e/controller_takeover.sh): the host a lease names.
  app.add_option("--test-hostname", flags.test_hostname)->group("");
}

ControllerConfig ConfigFromFlags(const ControllerFlags& flags) {
  ControllerConfig config = flags.config;
  config.schedule_interval = std::chrono::milliseconds(flags.schedule_ms);
  config.reconcile_interval = std::chrono::milliseconds(flags.reconcile_ms);
  config.unschedulable_after = std::chrono::seconds(flags.unschedulable_after_s);
  config.quarantine.base_duration = std::chrono::seconds(flags.quarantine_s);
  config.quarantine.max_duration = std::chrono::seconds(flags.quarantine_max_s);
  config.quarantine.probation = std::chrono::seconds(flags.probation_s);
  config.quarantine.certify_return = flags.certify_return;
  config.quarantine.certify_timeout = std::chrono::seconds(flags.certify_timeout_s);
  config.step_retention = {flags.steps_keep_full, flags.steps_thin_every};
  return config;
}

}  // namespace trellis::controller
