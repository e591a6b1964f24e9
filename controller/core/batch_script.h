#pragma once
// Renders the batch script and the sbatch argument vector for one attempt.
// Pure: inputs are validated here, outputs are strings.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/run_spec.h"

namespace trellis::controller {

struct AttemptPaths {
  std::string run_id;
  int attempt = 1;
  std::string run_dir;      // absolute
  std::string worker_bin;   // absolute path of trellis-worker on the compute nodes
  std::string controller_addr;  // host:port the workers dial
  std::string secret_file;  // absolute
  std::string job_tag;      // of the job name (AttemptJobName): from the secret's digest
  std::string tls_ca;       // absolute CA file the workers verify TLS with; empty: plain TCP
  // The state directory's address file (common/controller_address.h): a
  // worker dials what it names when the controller moved. Empty: none.
  std::string controller_file = {};
};

// Single-quotes a value for bash ('it'"'"'s').
std::string ShellQuote(const std::string& value);

// Fills the template's @KEY@ placeholders; refuses values that could not be
// passed safely (relative or control-character paths, bad ids or addresses).
absl::StatusOr<std::string> RenderBatchScript(const std::string& template_text,
                                              const AttemptPaths& paths);

// The Slurm job name of an attempt, "trellis-<run>.<attempt>.<tag>": it
// identifies the attempt's job before sbatch has returned its id (a controller
// killed in between finds the job by this name at its next submission). The
// tag, 8 hex digits of the attempt's secret's SHA-256, tells this attempt from
// one of the same run id in another controller's database (ids start at 1 in
// each), whose old job sacct still lists.
std::string AttemptJobName(const std::string& run_id, int attempt, std::string_view tag);

// The sbatch arguments (without "sbatch --parsable" and the script path).
std::vector<std::string> SbatchArgs(const spec::RunSpec& spec, const AttemptPaths& paths,
                                    const std::vector<std::string>& exclude_nodes);

// A spare pool job's name, "trellis-pool-<run>.<pool>.<tag>", found again by
// name as an attempt's is (the tag: 8 hex digits of the pool's own digest).
std::string PoolJobName(const std::string& run_id, int pool, std::string_view tag);

// What the one step of a spare pool job runs: `trellis-worker standby` on each
// of its nodes, which registers with the controller and waits until the job
// is drawn into a relaunch or ends (docs/architecture.md, "Spare pool").
struct PoolStandbyPaths {
  std::string worker_bin;       // absolute
  std::string controller_addr;  // host:port
  std::string secret_file;      // absolute: the pool job's own secret
  std::string tls_ca;           // absolute, or empty: plain TCP
  std::string controller_file = {};  // absolute, or empty (AttemptPaths says why)
};

// The sbatch arguments of a spare pool job (restart.spare_pool_nodes): the
// run's partition, account, time limit, GPUs and extra arguments, its nodes,
// kept off `exclude_nodes` (the quarantined ones and the run's own), and a
// batch script (`--wrap`) that runs the standby step, then holds the
// allocation until a relaunch runs a step in it (`srun --jobid`) or the
// controller cancels it. The standby step overlaps (`srun --overlap`): a
// relaunch's step starts beside it while it leaves. Refuses paths and an
// address that could not be passed safely, as RenderBatchScript does.
absl::StatusOr<std::vector<std::string>> PoolSbatchArgs(
    const spec::RunSpec& spec, const std::string& run_id, const std::string& run_dir,
    const std::string& job_name, int pool, const std::vector<std::string>& exclude_nodes,
    const PoolStandbyPaths& standby);

// A spare pool job's secret file, in the run's directory.
std::string PoolSecretPath(const std::string& run_dir, int pool);

}  // namespace trellis::controller
