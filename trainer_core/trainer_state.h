#pragma once
// The trainer's state, shared by its translation units (trainer.cc: set-up
// and the step; trainer_checkpoints.cc: checkpoints). Internal to
// trainer_core.

#include <memory>
#include <optional>

#include "trainer_core/checkpoint/async_save.h"
#include "trainer_core/checkpoint/checkpoint.h"
#include "trainer_core/checkpoint/pruner.h"
#include "trainer_core/checkpoint/state_ranges.h"
#include "trainer_core/data/batches.h"
#include "trainer_core/error.h"
#include "trainer_core/memory/host_room.h"
#include "trainer_core/parallel/fsdp.h"
#include "trainer_core/parallel/nccl_log_file.h"
#include "trainer_core/parallel/shard_optim.h"
#include "trainer_core/trainer.h"

namespace trellis::train {

// Converts LibTorch's exceptions at the API edge.
template <typename F>
auto Guard(F&& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    throw TrainError(std::string("LibTorch: ") + e.what_without_backtrace());
  }
}

struct Trainer::State {
  spec::TrainerSpec spec;
  TrainerOptions options;
  std::unique_ptr<Comm> own_comm;  // met here (options.connect) when the host gives none
  Comm* comm = nullptr;
  ExpertMesh mesh;
  torch::Device device = torch::kCPU;
  torch::Dtype compute_dtype = torch::kFloat;
  Corpus corpus;
  std::unique_ptr<BatchSource> data;
  std::unique_ptr<ShardedModel> model;
  std::unique_ptr<ShardedOptimizer> optim;
  int64_t step = 0;
  int64_t checkpoint_step = -1;
  // The last step Run trains to (-1: training.steps): the end checkpoint follows it.
  int64_t run_last_step = -1;
  std::unique_ptr<NcclLogFollower> nccl_log;  // while NCCL's channel count is wanted
  // Removes old checkpoints behind the steps (rank 0's); waits for them when
  // the trainer goes.
  CheckpointPruner pruner;
  // checkpoint.async's writer; last, so that it is gone (its copies and
  // thread done) before the tensors it copies.
  std::unique_ptr<AsyncCheckpointWriter> async_save;
  // This rank's memory bounds with the ranks that share each, counted at
  // start where the ranks will take host memory of the spec's (the offload
  // arena, checkpoint.async's copy); empty otherwise.
  std::vector<MemoryBound> shared_bounds;
  // checkpoint.every_steps = "auto" (trainer_checkpoints.cc): the step of
  // the next checkpoint (-1 until the launch's first steps are timed), and
  // the steps timed since the last choice (the launch's first one is not).
  struct AutoCheckpoints {
    int64_t next_step = -1;
    int64_t launch_steps = 0;
    int timed = 0;
    double seconds = 0;
    double MeanStep() const { return timed > 0 ? seconds / timed : 0; }
  } auto_checkpoints;

  // This rank's part of everything the trainer needs to continue.
  NamedTensors AllState() {
    NamedTensors out;
    for (auto& b : model->shards()) out.emplace_back("param." + b.layout->name, b.value);
    for (size_t i = 0; i < model->experts().size(); ++i)
      out.emplace_back("param.experts." + model->shards()[i + 1].layout->name,
                       model->experts()[i].value);
    for (size_t i = 0; i < model->router_bias().size(); ++i)
      out.emplace_back("router_bias.layers." + std::to_string(i), model->router_bias()[i]);
    for (auto& t : optim->State()) out.push_back(t);
    return out;
  }
  // A save behind the steps that completed: the newest checkpoint now.
  void NoteSaveBehind(const std::optional<AsyncCheckpointWriter::Completed>& done) {
    if (!done) return;
    checkpoint_step = done->step;
    if (options.on_note) options.on_note(DescribeSaveBehind(*done));
  }
  // How many ranks say `mine` (one all-reduce where world > 1).
  int RanksSaying(bool mine) {
    if (comm->size() == 1) return mine ? 1 : 0;
    at::Tensor flag = torch::full({1}, mine ? 1.0f : 0.0f,
                                  torch::TensorOptions().dtype(torch::kFloat32).device(device));
    comm->AllReduceSum(flag);
    return static_cast<int>(compat::ReadToHost(flag).item<float>());
  }
  // Each figure's largest value over the ranks (one all-gather where world > 1).
  std::vector<double> MaxOverRanks(const std::vector<double>& mine) {
    if (comm->size() == 1) return mine;
    const auto n = static_cast<int64_t>(mine.size());
    const auto on = torch::TensorOptions().dtype(torch::kFloat64).device(device);
    at::Tensor all = torch::empty({comm->size() * n}, on);
    comm->AllGatherInto(torch::tensor(mine, torch::kFloat64).to(device), all);
    const at::Tensor most = compat::ReadToHost(std::get<0>(all.view({comm->size(), n}).max(0)));
    std::vector<double> out(mine.size());
    for (int64_t i = 0; i < n; ++i) out[i] = most[i].item<double>();
    return out;
  }
  Sharding CheckpointSharding() const {
    return {comm, {mesh.world, mesh.node_size, mesh.ep}, StateRanges(spec.model)};
  }
};

}  // namespace trellis::train
