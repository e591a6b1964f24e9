#include "common/model_layout/rank_host_memory.h"

#include <cmath>
#include <cstdio>

#include "common/model_layout/model_layout.h"

namespace trellis::spec {

int64_t CheckpointStateBytes(const ModelSpec& model, int world) {
  constexpr int64_t kFp32 = 4;
  int64_t bytes = 8;  // adamw.step, int64
  for (const train::BlockLayout& block : train::ModelLayout(model)) {
    const int64_t shard = (train::DenseNumel(block) + world - 1) / world;
    bytes += 3 * shard * kFp32;  // weights, moment1, moment2
  }
  const int64_t expert_matrix = int64_t{model.expert_hidden} * model.hidden;
  const int64_t owned = model.experts / world;
  bytes += int64_t{model.layers} * 2 * 3 * owned * expert_matrix * kFp32;  // gate, up, down
  bytes += int64_t{model.layers} * model.experts * kFp32;                  // router biases
  return bytes;
}

int OffloadedLayers(double offload_fraction, int layers) {
  // The epsilon keeps exact products (0.5 of 4) from rounding down a layer.
  return static_cast<int>(std::floor(offload_fraction * layers + 1e-9));
}

int64_t OffloadArenaBytes(int offloaded_layers, int64_t input_bytes, int64_t page_bytes) {
  return (input_bytes + page_bytes - 1) / page_bytes * page_bytes * offloaded_layers;
}

std::string RankHostMemory::Describe() const {
  auto gib = [](int64_t bytes) {
    char text[32];
    const double b = static_cast<double>(bytes);
    if (b >= (1ull << 30))
      std::snprintf(text, sizeof text, "%.2f GiB", b / (1ull << 30));
    else
      std::snprintf(text, sizeof text, "%.1f MiB", b / (1ull << 20));
    return std::string(text);
  };
  std::string out;
  if (checkpoint_copy_bytes > 0)
    out = "checkpoint.async's copy of the state " + gib(checkpoint_copy_bytes);
  if (offload_arena_bytes > 0)
    out += (out.empty() ? "" : " + ") + std::string("activation offload's arena ") +
           gib(offload_arena_bytes);
  return out;
}

RankHostMemory RankHostMemoryOf(const TrainerSpec& trainer, int world, bool gpus) {
  RankHostMemory m;
  const CheckpointSpec& c = trainer.checkpoint;
  if (c.SavesBehindTheSteps())
    m.checkpoint_copy_bytes = CheckpointStateBytes(trainer.model, world);
  const TrainingSpec& t = trainer.training;
  const int layers = OffloadedLayers(trainer.parallel.offload_fraction, trainer.model.layers);
  if (layers > 0) {
    const int64_t rows = t.micro_batch > 0 ? t.micro_batch : t.global_batch / world;
    const bool cuda = t.device == "cuda" || (t.device == "auto" && gpus);
    const int64_t element = t.dtype == "bfloat16" || (t.dtype == "auto" && cuda) ? 2 : 4;
    m.offload_arena_bytes = OffloadArenaBytes(
        layers, rows * t.seq_len * trainer.model.hidden * element, kGatePageBytes);
  }
  return m;
}

}  // namespace trellis::spec
