#pragma once
// Rank layout: which global ranks a node runs and the environment each one
// gets (docs/architecture.md, "A run's life, as implemented", step 5). Pure: the shell passes the worker's
// own environment in and spawns what comes out.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/node_probe.h"  // SocketIndexForRank: which socket a rank is bound to

namespace trellis::worker {

using EnvMap = std::map<std::string, std::string>;

// The GO fields of the controller's gate decision.
struct GoDecision {
  int node_index = 0;
  int rank_offset = 0;
  int ranks_per_node = 0;
  int world_size = 0;
  std::string master_addr;
  int master_port = 0;
  int64_t resume_step = -1;  // -1: start fresh
  std::string checkpoint_dir;
  std::vector<std::string> data_roots;  // TRELLIS_DATA_ROOTS, one per line
  double mtbf_s = 0;                    // TRELLIS_MTBF_S; 0: not sent
};

struct LaunchId {
  std::string run_id;
  int attempt = 0;
  int launch = 0;
};

struct RankLayoutInput {
  LaunchId launch;
  GoDecision go;
  int spec_ranks_per_node = 0;
  int gpus_per_node = 0;
  EnvMap spec_env;    // the spec's [env]
  EnvMap worker_env;  // the worker's own environment
  std::string run_dir;
  std::string socket_dir;  // where the step sockets live (short, private)
  // The node's sockets (NUMA nodes with CPUs), ascending. With more than one,
  // each rank's CPUs and memory are bound to one of them through `numactl`
  // (its path; empty: not installed, no binding).
  std::vector<int> socket_nodes;
  std::string numactl;
};

struct RankPlan {
  int local_rank = 0;
  int global_rank = 0;
  std::string step_socket;
  std::string log_path;
  EnvMap env;                            // the rank's complete environment
  int numa_node = -1;                    // the socket it is bound to; -1: not bound
  std::vector<std::string> argv_prefix;  // runs before the command (numactl ...)
};

// "<socket_dir>/rank-<global>.sock": short, so it fits a unix socket path.
std::string StepSocketPath(const std::string& socket_dir, int global_rank);
// "<run_dir>/attempt-A/launch-L/rank-R.log".
std::string RankLogPath(const std::string& run_dir, const LaunchId& launch, int global_rank);

// Defaults every rank gets unless the spec's [env] sets them:
// OMP_NUM_THREADS=1, NCCL_MAX_CTAS=16, MIMALLOC_ALLOW_THP=0. PlanRanks also
// gives OPENBLAS_NUM_THREADS the rank's OMP_NUM_THREADS unless [env] sets it.
const EnvMap& LaunchHygiene();

// True when a node's ranks should be bound to sockets (it has more than one).
bool WantsNumaBinding(const RankLayoutInput& in);

// One plan per local rank, in local-rank order. Errors name the field of the
// decision or spec that does not fit (the controller and the spec disagree).
absl::StatusOr<std::vector<RankPlan>> PlanRanks(const RankLayoutInput& in);

}  // namespace trellis::worker
