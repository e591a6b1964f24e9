#pragma once
// The trainer's sections of a run spec: [model], [parallel], [training],
// [checkpoint]. Shared by the controller (validation), the worker (`[model]`
// mode) and trellis-train. Torch-free.

#include <toml++/toml.h>

#include <cstdint>
#include <string>

#include "common/spec/field_errors.h"

namespace trellis::spec {

struct ModelSpec {
  int layers = 2;
  int hidden = 64;
  int heads = 4;
  int kv_heads = 2;
  int experts = 4;
  int experts_per_token = 2;
  int expert_hidden = 128;
  // Group-limited routing: the experts split into this many groups of
  // consecutive experts and every token takes experts_per_token / groups from
  // each; with groups a multiple of parallel.ep every expert-parallel rank gets
  // the same token-expert load. 1: plain top-k.
  int expert_groups = 1;
  int vocab = 256;
  bool shared_expert = false;
  double rope_theta = 10000;
  double norm_eps = 1e-5;
  double init_std = 0.02;  // before the per-parameter depth/shape scaling
};

struct ParallelSpec {
  int node_size = 0;  // 0: the run's ranks_per_node
  int ep = 0;         // 0: node_size
  // Gradients travel to their owners in this dtype and are summed in fp32;
  // "float32" is exact up to summation order (for exactness tests).
  std::string grad_reduce_dtype = "bfloat16";
  // Keep only each layer's input in forward and recompute the layer in
  // backward (one more forward's work, a layer's activations at a time).
  // false keeps every activation: faster where memory allows (one GPU).
  bool activation_checkpointing = true;
  // Of the layers whose inputs checkpointing keeps, this fraction (the first
  // ones, rounded down) keeps them in a host arena instead of device memory:
  // copied out after the layer's forward, back one layer ahead of its
  // recompute. 0: none. Needs activation_checkpointing.
  double offload_fraction = 0;
  // How expert blocks travel to the peers that run them: "float32" (exact),
  // "bfloat16", or "fp8" (E4M3, blocks of 128 values with an fp32 scale; a
  // quarter of the bytes). Master weights and gradients stay fp32.
  std::string expert_gather_dtype = "float32";
  // Layers whose weights are gathered ahead while another layer computes (and
  // gradient reductions of as many layers left in flight); 0: every
  // collective waited for at once. At most prefetch_layers + 1 gathered
  // layers are alive. The numbers do not depend on it.
  int prefetch_layers = 1;
};

struct TrainingSpec {
  int seq_len = 128;
  int global_batch = 8;  // rows per step, over all ranks
  // Rows per forward on each rank (gradient accumulation): a rank runs its
  // global_batch / world rows in micro-batches of this many, accumulating
  // gradients, then takes one optimizer step. 0: all of them in one forward.
  int micro_batch = 0;
  int64_t steps = 100;  // also the horizon of the learning-rate schedule
  double lr = 3e-3;     // AdamW (embedding, head, router, norms)
  uint64_t seed = 1234;
  std::string data;  // corpus path (read-only input)
  // The order of rows in an epoch: "shuffled", or "cost_bands": rows of about
  // the same attention cost (sum of squared document lengths) in each step,
  // so that no rank of a step waits on another with a costlier row
  // (trainer_core/data/row_order.h). Either way every row once per epoch.
  std::string row_order = "shuffled";

  int64_t warmup_steps = 10;
  double min_lr_ratio = 0.1;  // cosine decays to lr * min_lr_ratio
  double weight_decay = 0.1;  // decoupled; matrices only
  double grad_clip = 1.0;     // global L2 norm; 0 disables clipping
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.95;
  double adam_eps = 1e-8;
  double muon_lr = 0.02;
  double muon_momentum = 0.95;  // Nesterov
  int muon_ns_steps = 5;
  std::string muon_ns_dtype = "auto";  // auto (bf16 on GPU or with bf16 compute), float32, bfloat16
  double aux_loss_coef = 0.01;         // load-balancing loss weight; 0 disables
  double router_bias_rate = 0;         // aux-loss-free balancing bias step; 0 disables
  // Compute dtype (master weights stay fp32): float32, bfloat16, or auto:
  // bf16 on CUDA and on CPUs with bf16 instructions, float32 on other CPUs
  // (trainer_core/model/compute_dtype.h says why).
  std::string dtype = "auto";
  std::string device = "auto";  // auto, cpu, cuda
  // The same losses bit for bit on every run of the same spec, weights and
  // batches: ATen's deterministic kernels (an op without one is refused) and
  // a fixed cuBLAS workspace (trainer_core/determinism.h). Off: some CUDA
  // kernels sum in a varying order, a little faster.
  bool deterministic = false;
  // Where a new run starts from instead of fresh weights: a checkpoint
  // directory and step, "DIR@STEP" or "DIR@latest" ("DIR" alone: latest);
  // through the controller also "RUN@STEP", another run's checkpoints, which
  // it stores as that run's directory (trellis fork, trellis retry). Only
  // while the run has no checkpoint of its own: its relaunches resume from
  // those. Empty: fresh weights.
  std::string init_from{};
  // What comes from there: "weights" (the model; the step, optimizer and data
  // position start afresh, and only the model's shape must match),
  // "weights_optimizer" (and the optimizer's state), or "all" (an exact
  // continuation: step, data position and optimizer, which needs the same
  // spec identity and corpus, as a resume does).
  std::string init_state = "weights";
};

struct CheckpointSpec {
  int64_t every_steps = 0;  // 0: only at the end
  // every_steps = "auto": as often as checkpoints pay (common/checkpoint_interval.h):
  // Young's sqrt(2 x cost x MTBF) on the measured cost of a checkpoint and the
  // controller's failure rate of the run's nodes, between auto_min_s and
  // auto_max_s; a launch's first checkpoint comes after auto_min_s of steps.
  bool every_steps_auto = false;
  double auto_min_s = 60;
  double auto_max_s = 14400;
  int keep = 2;
  // A checkpoint when the last step is done (the run's result). false: none,
  // for benchmark runs whose model is thrown away (moe-bench's is ~30 GB).
  bool at_end = true;
  // The every_steps checkpoints written behind the steps: the state is
  // copied to host memory (that much more of it, kept for the next save; the
  // launch gate counts it per socket, rank_host_memory.h) and a thread writes
  // it while training goes on; the step counts once every rank's shard is on
  // disk. The last checkpoint and the one at a stop are written in place (the
  // run waits for them anyway). Without every_steps there is no copy.
  bool async = false;
  // The host memory the copy must leave available, in GiB, on the tightest
  // bound of the rank (its NUMA node when bound to one, else the host; its
  // Slurm job's cgroup limit). Where the copy would leave less on any rank,
  // every rank writes in place instead, said in their logs.
  double async_keep_free_gib = 4;

  // Whether any checkpoint goes behind the steps (and so a host copy is kept).
  bool SavesBehindTheSteps() const { return async && (every_steps > 0 || every_steps_auto); }
};

struct TrainerSpec {
  ModelSpec model;
  ParallelSpec parallel;
  TrainingSpec training;
  CheckpointSpec checkpoint;
};

// Reads the four trainer sections from a run spec's root table. Absent
// sections keep their defaults; other sections of the root are ignored here.
TrainerSpec ParseTrainerSections(const toml::table& root, FieldErrors* errors);

}  // namespace trellis::spec
