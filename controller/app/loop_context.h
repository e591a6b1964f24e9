#pragma once
// What every part of the controller reads: its configuration, a read-only
// view of the store and the clock (all used on the loop thread only), and the
// reads they share.

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/atomic_file.h"
#include "common/checkpoint_interval.h"
#include "common/clock.h"
#include "common/spec/run_spec.h"
#include "controller/core/quarantine.h"
#include "controller/core/step_batch.h"
#include "controller/app/store_view.h"
#include "controller/app/worker_reports.h"
#include "controller/store/step_writer.h"

namespace trellis::controller {

// Certified return's check jobs (node_certifier.h); whether checks are asked
// for, and their timeout, are QuarantineConfig's.
struct CertifyConfig {
  std::string command;    // the site's, run with /bin/sh -c; empty: trellis-worker check --certify
  std::string partition;  // empty: --partition, else Slurm's default
  std::string account;    // empty: Slurm's default
  double touch_gib = 1;   // trellis-worker check --certify: memory touched per NUMA node
};

struct ControllerConfig {
  std::string output_root;     // absolute; every run directory lives under it
  // --data-root (repeatable): a [model] run's corpus must lie under one of
  // these, symlinks and ".." resolved (app/spec_paths.h). Empty: the owner's
  // home directory and output_root.
  std::vector<std::string> data_roots;
  std::string worker_bin;      // absolute path of trellis-worker on compute nodes
  std::string advertise_addr;  // host:port workers dial
  // The state directory's address file, which workers re-read when the
  // controller moved (common/controller_address.h); empty: none.
  std::string controller_file;
  // The CA file workers verify the controller's certificate with (a copy
  // under output_root); empty: they dial plain TCP.
  std::string worker_tls_ca;
  std::string sbatch_template;
  std::string default_partition;
  std::chrono::milliseconds schedule_interval{1000};
  std::chrono::milliseconds reconcile_interval{5000};
  // A run whose job Slurm keeps pending this long for a reason that does not
  // pass by itself fails (NeverStartsWhile, decisions.h); 0: it waits.
  std::chrono::seconds unschedulable_after{3600};
  // Runs without a [notify] section are notified so; node quarantines always
  // (--notify-webhook, --notify-command).
  spec::NotifySection notify_defaults;
  int master_port = 29500;
  // The prior of the nodes' failure rate (controller/core/failure_rate.h).
  double node_mtbf_prior_hours = kDefaultNodeMtbfHours;
  QuarantineConfig quarantine;
  bool can_drain = false;  // also `scontrol update state=drain` quarantined nodes
  // Where the live workers' /metrics addresses are written for Prometheus's
  // file-based service discovery; empty: nowhere.
  std::string prometheus_sd_file;
  // The step pipeline (docs/architecture.md, "The step pipeline").
  StepRetention step_retention;
  std::chrono::milliseconds step_prune_every{60000};
  // Reads the final report a worker left in its launch's directory when it
  // could not reach this controller (NotFound: none). Its decoding belongs to
  // the API layer (rpc/final_report_file.h), which main.cc hands in here;
  // unset: no file is read.
  std::function<absl::StatusOr<WorkerReport>(const std::string& run_dir, const WorkerId& id)>
      read_final_report;
  // Reads a worker's step spool (rpc/step_spool_file.h), likewise; unset:
  // spools are not read.
  std::function<absl::StatusOr<std::vector<StepBatch>>(const std::string& path,
                                                       const BatchSource& source)>
      read_step_spool;
  CertifyConfig certify;
};

struct LoopContext {
  const ControllerConfig& config;
  StoreView& store;
  Clock& clock;

  // The stored spec with the controller's defaults filled in.
  absl::StatusOr<spec::RunSpec> ParseStoredSpec(const RunRecord& run) const;
  std::string RunDirFor(const spec::RunSpec& spec, const std::string& run_id) const;
  // Quarantined nodes now: every submission excludes them.
  std::vector<std::string> ExcludedNow() const;
};


}  // namespace trellis::controller
