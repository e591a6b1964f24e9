#pragma once
// The worker's command-line arguments as values, and their validation. Pure:
// main.cc parses flags into these, the shells run on them.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace trellis::worker {

using Seconds = std::chrono::duration<double>;

// Who this worker is on every call (the secret comes from a file).
struct IdentityArgs {
  std::string controller;  // HOST:PORT
  std::string run_id;
  int attempt = 0;
  int launch = 0;
  std::string node;
  std::string secret_file;
  std::string tls_ca;  // CA file to verify the controller's TLS certificate; empty: plain TCP
  // <state dir>/controller.address (common/controller_address.h): where a
  // controller that moved to another host says it is; empty: --controller only.
  std::string controller_file = {};
};

struct AgentArgs {
  IdentityArgs id;
  std::string run_dir;
  Seconds heartbeat_interval{5};
  Seconds kill_grace{10};
  Seconds register_retry{120};       // total time to keep retrying an unreachable controller
  std::optional<Seconds> gate_wait;  // default: the spec's gate.timeout_s + kGateWaitMargin
  Seconds stream_flush{10};          // at exit: time to deliver what is still queued
  int max_queued_reports = 65536;  // step records held until stored
  // The memory probe (docs/architecture.md, "A run's life, as implemented", step 4).
  std::string sysfs_root;          // empty: $TRELLIS_SYSFS_ROOT, else /sys
  double touch_probe_gib = 8;      // gate.touch_probe: bytes touched per socket, at most
  Seconds touch_probe_budget{20};  // gate.touch_probe: for all sockets together
  // [model] ranks run this program (default: trellis-rank beside trellis-worker).
  std::string rank_binary;
  // Where the node's ranks' metrics are served: HOST:PORT (port 0: any free
  // one, as several workers may share a host) or kMetricsOff.
  std::string metrics_listen = "0.0.0.0:0";
};

inline constexpr char kMetricsOff[] = "off";

// Bounds of the touch probe flags: it runs before Register, so the gate waits on it.
inline constexpr double kMaxTouchProbeGib = 1024;
inline constexpr Seconds kMaxTouchProbeBudget{600};

inline constexpr Seconds kGateWaitMargin{60};

struct NextLaunchArgs {
  IdentityArgs id;  // launch 0 exactly with requeue_count: no launch yet
  int step_exit_code = 0;
  Seconds timeout{60};
  int requeue_count = 0;            // SLURM_RESTART_COUNT of a requeued job
  std::string allocation_nodelist;  // SLURM_JOB_NODELIST, with requeue_count
  bool terminated_by_slurm = false;  // Slurm signalled the batch script
  bool time_limit_warned = false;    // Slurm's wall-time warning came during the launch
};

// `trellis-worker standby`: the one step of a run's spare pool job.
struct StandbyArgs {
  std::string controller;  // HOST:PORT
  std::string run_id;
  int pool = 0;  // the run's pool job number, from 1
  std::string node;
  std::string secret_file;  // the pool job's secret
  std::string tls_ca;
  std::string run_dir;  // spec.toml is read from it (gate.touch_probe)
  std::string sysfs_root;
  double touch_probe_gib = 8;
  Seconds touch_probe_budget{20};
  // Each call waits for the controller's next reconciliation (a few
  // seconds); one unanswered this long is made again.
  Seconds call_timeout{60};
  std::string controller_file = {};  // as IdentityArgs::controller_file
};

// HOST:PORT or [IPv6]:PORT with a port in [1, 65535].
bool IsValidControllerAddress(std::string_view address);
// HOST:PORT or [IPv6]:PORT with a port in [0, 65535] (0: any free port).
bool IsValidListenAddress(std::string_view address);
// The metrics address sent to the controller: `hostname` when `listen` binds
// every interface (0.0.0.0, [::]), else the host it binds, with `port`.
std::string AdvertisedMetricsAddress(std::string_view listen, std::string_view hostname, int port);
// --controller-file: empty, or an absolute path (the worker's working
// directory is not the controller's).
absl::Status ValidateControllerFile(const std::string& path);
// Run ids and node names travel in file names and the batch script's words:
// [A-Za-z0-9._-], 1..128 characters, not starting with '-' or '.'.
bool IsSafeName(std::string_view name);

absl::Status ValidateIdentityArgs(const IdentityArgs& a);
absl::Status ValidateAgentArgs(const AgentArgs& a);
absl::Status ValidateNextLaunchArgs(const NextLaunchArgs& a);
absl::Status ValidateStandbyArgs(const StandbyArgs& a);

// The secret file's content without surrounding whitespace (editors add a newline).
std::string TrimSecret(std::string_view content);

// `trellis-worker check`: what `trellis doctor` asks of one compute node
// (docs/architecture.md, "Doctor").
struct CheckArgs {
  std::string controller;  // HOST:PORT
  std::string controller_file = {};  // as IdentityArgs::controller_file
  std::string tls_ca;                // empty: plain TCP
  std::vector<std::string> paths;    // each must be visible from the node
  std::string sysfs_root;            // as AgentArgs::sysfs_root
  int expect_gpus = 0;               // the partition's GPUs per node; 0: not checked
  // --certify: the check of a node leaving quarantine (certify_checks.h).
  bool certify = false;
  double touch_gib = 1;  // --touch-gib: touched per NUMA node with --certify
};

// A node has at most this many GPUs (a sanity bound on --expect-gpus).
inline constexpr int kMaxExpectedGpus = 1024;

// --path must be absolute: the node resolves it, not the login node's cwd.
absl::Status ValidateCheckArgs(const CheckArgs& a);

}  // namespace trellis::worker
