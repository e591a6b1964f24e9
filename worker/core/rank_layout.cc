#include "worker/core/rank_layout.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace trellis::worker {
namespace {

absl::Status CheckDecision(const RankLayoutInput& in) {
  const GoDecision& go = in.go;
  if (go.ranks_per_node < 1 || go.ranks_per_node > 1024)
    return absl::InvalidArgumentError(
        absl::StrCat("gate decision ranks_per_node must be in [1, 1024], got ", go.ranks_per_node));
  if (go.ranks_per_node != in.spec_ranks_per_node)
    return absl::InvalidArgumentError(
        absl::StrCat("gate decision ranks_per_node ", go.ranks_per_node,
                     " differs from the spec's slurm.ranks_per_node ", in.spec_ranks_per_node));
  if (go.rank_offset < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("gate decision rank_offset must be >= 0, got ", go.rank_offset));
  if (static_cast<int64_t>(go.rank_offset) + go.ranks_per_node > go.world_size)
    return absl::InvalidArgumentError(absl::StrCat("gate decision ranks [", go.rank_offset, ", ",
                                                   go.rank_offset + go.ranks_per_node,
                                                   ") do not fit world_size ", go.world_size));
  if (go.master_addr.empty())
    return absl::InvalidArgumentError("gate decision master_addr is empty");
  if (go.master_port < 1 || go.master_port > 65535)
    return absl::InvalidArgumentError(
        absl::StrCat("gate decision master_port must be in [1, 65535], got ", go.master_port));
  if (go.resume_step < -1)
    return absl::InvalidArgumentError(
        absl::StrCat("gate decision resume_step must be >= -1, got ", go.resume_step));
  if (in.gpus_per_node < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("slurm.gpus_per_node must be >= 0, got ", in.gpus_per_node));
  return absl::OkStatus();
}

// Slurm may already have restricted the node's GPUs (CUDA_VISIBLE_DEVICES="4,5,6,7"
// for a partial node): local rank i then owns the i-th of those, not device i.
std::string DeviceFor(const EnvMap& worker_env, int local_rank) {
  auto it = worker_env.find("CUDA_VISIBLE_DEVICES");
  if (it != worker_env.end() && !it->second.empty()) {
    std::vector<std::string> devices = absl::StrSplit(it->second, ',');
    if (local_rank < static_cast<int>(devices.size()) && !devices[local_rank].empty())
      return devices[local_rank];
  }
  return std::to_string(local_rank);
}

}  // namespace

const EnvMap& LaunchHygiene() {
  static const EnvMap* kHygiene = new EnvMap{
      // One OpenMP thread per rank: an inherited value was meant for the
      // worker, not for each of the node's ranks.
      {"OMP_NUM_THREADS", "1"},
      // NCCL otherwise takes up to 88 of 132 SMs away from the expert GEMMs.
      {"NCCL_MAX_CTAS", "16"},
      // mimalloc on 512 MiB transparent huge pages inflates host memory.
      {"MIMALLOC_ALLOW_THP", "0"},
  };
  return *kHygiene;
}

std::string StepSocketPath(const std::string& socket_dir, int global_rank) {
  return absl::StrCat(socket_dir, "/rank-", global_rank, ".sock");
}

std::string RankLogPath(const std::string& run_dir, const LaunchId& launch, int global_rank) {
  return absl::StrCat(run_dir, "/attempt-", launch.attempt, "/launch-", launch.launch, "/rank-",
                      global_rank, ".log");
}

bool WantsNumaBinding(const RankLayoutInput& in) { return in.socket_nodes.size() > 1; }

absl::StatusOr<std::vector<RankPlan>> PlanRanks(const RankLayoutInput& in) {
  if (absl::Status st = CheckDecision(in); !st.ok()) return st;
  const GoDecision& go = in.go;
  std::vector<RankPlan> plans;
  plans.reserve(go.ranks_per_node);
  for (int local = 0; local < go.ranks_per_node; ++local) {
    RankPlan p;
    p.local_rank = local;
    p.global_rank = go.rank_offset + local;
    p.step_socket = StepSocketPath(in.socket_dir, p.global_rank);
    p.log_path = RankLogPath(in.run_dir, in.launch, p.global_rank);
    // Precedence: the worker's environment < launch hygiene < the spec's
    // [env] < the contract.
    p.env = in.worker_env;
    for (const auto& [k, v] : LaunchHygiene()) p.env[k] = v;
    for (const auto& [k, v] : in.spec_env) p.env[k] = v;
    // OpenBLAS behind LibTorch's fp32 matmuls: the OpenMP build (what
    // deploy/setup.sh installs) follows OMP_NUM_THREADS, but a pthread build
    // sizes its own pool from OPENBLAS_NUM_THREADS first, then OMP_NUM_THREADS,
    // where an inherited value would beat the rank's cap. Same cap, unless
    // [env] sets its own.
    if (in.spec_env.count("OPENBLAS_NUM_THREADS") == 0)
      p.env["OPENBLAS_NUM_THREADS"] = p.env["OMP_NUM_THREADS"];
    p.env["RANK"] = std::to_string(p.global_rank);
    p.env["WORLD_SIZE"] = std::to_string(go.world_size);
    p.env["LOCAL_RANK"] = std::to_string(local);
    p.env["LOCAL_WORLD_SIZE"] = std::to_string(go.ranks_per_node);
    p.env["MASTER_ADDR"] = go.master_addr;
    p.env["MASTER_PORT"] = std::to_string(go.master_port);
    p.env["TRELLIS_RUN"] = in.launch.run_id;
    p.env["TRELLIS_ATTEMPT"] = std::to_string(in.launch.attempt);
    p.env["TRELLIS_LAUNCH"] = std::to_string(in.launch.launch);
    p.env["TRELLIS_STEP_SOCKET"] = p.step_socket;
    p.env["TRELLIS_CHECKPOINT_DIR"] = go.checkpoint_dir;
    p.env["TRELLIS_RESUME_STEP"] = std::to_string(go.resume_step);
    // Seconds between failures of the run's nodes, as the controller's history
    // gives them (checkpoint.every_steps = "auto"; a generic command may use it).
    if (go.mtbf_s > 0) p.env["TRELLIS_MTBF_S"] = absl::StrFormat("%.3f", go.mtbf_s);
    if (!go.data_roots.empty()) {
      std::string roots;
      for (const auto& r : go.data_roots) roots += (roots.empty() ? "" : "\n") + r;
      p.env["TRELLIS_DATA_ROOTS"] = roots;
    }
    if (in.gpus_per_node > 0) p.env["CUDA_VISIBLE_DEVICES"] = DeviceFor(in.worker_env, local);
    if (WantsNumaBinding(in) && !in.numactl.empty()) {
      const int sockets = static_cast<int>(in.socket_nodes.size());
      p.numa_node = in.socket_nodes[SocketIndexForRank(local, go.ranks_per_node, sockets)];
      const std::string node = std::to_string(p.numa_node);
      p.argv_prefix = {in.numactl, "--cpunodebind=" + node, "--membind=" + node};
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

}  // namespace trellis::worker
