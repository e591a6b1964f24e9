#pragma once
// The run spec (TOML): what a user submits. Parsed and validated in one place,
// used by the controller (SubmitRun), the worker and the CLI's --dry-run.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/spec/field_errors.h"
#include "common/spec/trainer_spec.h"

namespace trellis::spec {

inline constexpr size_t kMaxSpecBytes = 1 << 20;
inline constexpr int kMaxNodes = 16384;

struct JobSection {
  std::string name;                  // [a-z0-9-], at most 63
  std::vector<std::string> command;  // argv; a TOML string becomes {"/bin/sh", "-c", s}
  std::string output_dir;            // relative to the controller's output root; "" = run id
};

struct SlurmSection {
  std::string partition;
  std::string account;
  int nodes = 1;
  int ranks_per_node = 1;
  int gpus_per_node = 0;
  int spare_nodes = 0;
  int64_t time_limit_minutes = 0;  // 0: the partition's default
  std::string nodelist;            // optional pin (Slurm hostlist)
  std::vector<std::string> extra_args;
  int signal_grace_s = 120;        // --signal=B:USR1@<grace>
};

struct GateSection {
  double min_free_gib_per_socket = 100.0;
  double max_unattributed_gib_per_socket = 24.0;
  int timeout_s = 120;
  bool touch_probe = false;
};

struct RestartSection {
  int max_restarts = 0;  // relaunches and new attempts after a failure together
  int backoff_s = 30;
  // The backoff doubles only with the restarts since a launch last trained
  // this long (recovery.h); 0: it never doubles.
  int backoff_reset_s = 3600;
  int hang_timeout_s = 600;        // no newer step from a rank for this long: hung
  int heartbeat_timeout_s = 30;    // a worker silent this long is lost
  int startup_timeout_s = 900;     // before the first step: model load, data, NCCL init
  bool relaunch_in_allocation = true;  // retry on the job's healthy nodes, not a new job
  // "ahead": while an attempt trains, its continuation waits in Slurm's queue,
  // eligible a lead before the attempt's time limit, and takes over when it
  // starts (docs/architecture.md, "Continuations ahead"); "after": a
  // continuation is submitted once the attempt has ended. Jobs without a
  // time limit have no continuation either way.
  std::string continuation = "ahead";
  // The lead, in seconds; 0: "auto" (the queue waits seen on the partition).
  int continuation_lead_s = 0;
  // Nodes of a standing Slurm job of the run's own, drawn on by a relaunch that
  // finds too few healthy nodes in the allocation, then refilled
  // (docs/architecture.md, "Spare pool"); 0: none.
  int spare_pool_nodes = 0;
  // A launch out of device or host memory (device_oom, host_oom) fails the
  // run: the same program on the same data would run out again, and a
  // relaunch would only spend the restart budget. true: restarted as any
  // failure (memory another job's, or a leak that a restart clears).
  bool retry_oom = false;
  // Hang timeouts learned from the launch's own steps and the run's earlier
  // starts (controller/core/hang_timeout.h); hang_timeout_s and
  // startup_timeout_s stay their upper bounds. false: those two alone.
  bool hang_learned = true;
  double hang_floor_s = 5;     // never shorter than this
  double hang_factor = 10;     // x the p99 of the gaps between steps
  double startup_floor_s = 60;
  double startup_factor = 3;   // x the longest earlier start
};

inline constexpr int kMaxSparePoolNodes = 64;

// The range of restart.continuation_lead_s when given as seconds.
inline constexpr int kMinContinuationLeadS = 30;
inline constexpr int kMaxContinuationLeadS = 86400;

struct HealthSection {
  int straggler_window = 20;      // K: complete steps looked at
  int straggler_min_slow = 10;    // M (1..K; unset and K < 10: K): slow steps that make one
  double straggler_factor = 1.5;  // F: slow means step time > F x the others' median
  bool straggler_strike = false;  // a straggler's node gets a quarantine strike
};

// Who hears of the run's events (docs/architecture.md, "Notifications"): a
// webhook (a JSON POST) and a command (run with the event in its
// environment), on the events named; empty: the controller's defaults.
struct NotifySection {
  std::string webhook;  // http:// or https:// URL
  std::string command;  // run by /bin/sh -c on the controller's host
  // Of "end" (SUCCEEDED, FAILED, CANCELLED), "failure" (FAILED), "restart"
  // (a relaunch or a new attempt after a failure), "handoff" (a
  // continuation took over); the default: all.
  std::vector<std::string> on = {"end", "failure", "restart", "handoff"};
  bool present() const { return !webhook.empty() || !command.empty(); }
};

// The events NotifySection::on may name.
const std::vector<std::string>& NotifyEvents();

struct RunSpec {
  JobSection job;
  SlurmSection slurm;
  GateSection gate;
  RestartSection restart;
  HealthSection health;
  std::map<std::string, std::string> env;
  bool has_model = false;  // [model] mode instead of [job].command
  TrainerSpec trainer;     // [model], [parallel], [training], [checkpoint]
  NotifySection notify{};

  int total_nodes() const { return slurm.nodes + slurm.spare_nodes; }
  int world_size() const { return slurm.nodes * slurm.ranks_per_node; }
};

// Parses and validates a whole spec. On any error returns nullopt and fills
// `errors` with one entry per bad field (never stops at the first).
std::optional<RunSpec> ParseRunSpec(std::string_view toml_text, FieldErrors* errors);

// Names and paths shared by other validators.
bool IsValidRunName(std::string_view name);
// A relative path with no "..", no empty or "." components, [A-Za-z0-9._-/].
bool IsSafeRelativePath(std::string_view path);
// The sbatch options a spec may pass through [slurm].extra_args.
const std::vector<std::string>& AllowedSbatchOptions();

}  // namespace trellis::spec
