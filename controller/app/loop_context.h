#pragma once
// What every part of the controller reads: its configuration, the store, the
// clock and the metrics (all used on the loop thread only), and the reads and
// writes they share.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/spec/run_spec.h"
#include "controller/core/quarantine.h"
#include "controller/store/step_writer.h"
#include "controller/store/store.h"

namespace trellis::controller {

class Metrics;

struct ControllerConfig {
  std::string output_root;     // absolute; every run directory lives under it
  // --data-root (repeatable): a [model] run's corpus must lie under one of
  // these, symlinks and ".." resolved (app/spec_paths.h). Empty: the owner's
  // home directory and output_root.
  std::vector<std::string> data_roots;
  std::string worker_bin;      // absolute path of trellis-worker on compute nodes
  std::string advertise_addr;  // host:port workers dial
  // The CA file workers verify the controller's certificate with (a copy
  // under output_root); empty: they dial plain TCP.
  std::string worker_tls_ca;
  std::string sbatch_template;
  std::string default_partition;
  std::chrono::milliseconds schedule_interval{1000};
  std::chrono::milliseconds reconcile_interval{5000};
  int master_port = 29500;
  QuarantineConfig quarantine;
  bool can_drain = false;  // also `scontrol update state=drain` quarantined nodes
  // Where the live workers' /metrics addresses are written for Prometheus's
  // file-based service discovery; empty: nowhere.
  std::string prometheus_sd_file;
  // The step pipeline (docs/architecture.md, "The step pipeline").
  StepRetention step_retention;
  std::chrono::milliseconds step_prune_every{60000};
  // Test hook (tests/e2e/crash_after_sbatch.sh): SIGKILL the controller right
  // after sbatch returns a new job's id, before it is stored.
  bool test_kill_after_sbatch = false;
};

struct LoopContext {
  ControllerConfig& config;
  Store& store;
  Clock& clock;
  Metrics& metrics;

  // The stored spec with the controller's defaults filled in.
  absl::StatusOr<spec::RunSpec> ParseStoredSpec(const RunRecord& run) const;
  std::string RunDirFor(const spec::RunSpec& spec, const std::string& run_id) const;
  // Quarantined nodes now: every submission excludes them.
  std::vector<std::string> ExcludedNow() const;
};

// Writes `text` beside `path` and renames it over `path`, so that readers see
// the old file or the new one, never a part.
absl::Status WriteFileAtomically(const std::string& path, const std::string& text, mode_t mode);

}  // namespace trellis::controller
