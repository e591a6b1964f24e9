#pragma once
// The host memory a rank of a [model] run takes that the spec alone decides,
// so that the launch gate can count it on each socket before any rank starts
// (docs/architecture.md, "The gate"): checkpoint.async's host copy of the
// rank's checkpoint state and parallel.offload_fraction's activation arena.
// The trainer takes its own figures from the same functions. Torch-free.

#include <cstdint>
#include <string>

#include "common/spec/trainer_spec.h"

namespace trellis::spec {

// The bytes of one rank's checkpoint state at `world` ranks (every rank holds
// as much): the dense part of each block (fp32 master weights, first and
// second moments) flat-sharded over the world and padded to a multiple of
// it; each layer's routed experts (fp32 weights and Muon momentum) owned
// whole, experts / world per rank; the router biases and AdamW's step count.
int64_t CheckpointStateBytes(const ModelSpec& model, int world);

// Layers whose inputs activation offload keeps on the host: the fraction
// rounded down (0.86 of 74 is 63).
int OffloadedLayers(double offload_fraction, int layers);

// The offload arena for `offloaded_layers` inputs of `input_bytes` each: a
// slot per layer, each rounded up to `page_bytes`.
int64_t OffloadArenaBytes(int offloaded_layers, int64_t input_bytes, int64_t page_bytes);

// The page the gate rounds an arena's slots to: the largest base page of the
// nodes it may judge (64 KiB on aarch64 kernels such as GH200's), so its
// figure is never below the trainer's.
inline constexpr int64_t kGatePageBytes = 64 << 10;

struct RankHostMemory {
  int64_t checkpoint_copy_bytes = 0;  // checkpoint.async with every_steps; else 0
  int64_t offload_arena_bytes = 0;    // parallel.offload_fraction > 0; else 0
  int64_t total() const { return checkpoint_copy_bytes + offload_arena_bytes; }
  // "checkpoint.async's copy of the state 3.79 GiB + activation offload's
  // arena 512.0 MiB"; empty when total() is 0.
  std::string Describe() const;
};

// What each rank of a `world`-rank run of `trainer` takes on its host, as the
// gate counts it: training.dtype "auto" is bf16 where the ranks run on GPUs
// (training.device "cuda", or "auto" on nodes with GPUs: `gpus`) and fp32
// otherwise (the larger of a CPU's two choices).
RankHostMemory RankHostMemoryOf(const TrainerSpec& trainer, int world, bool gpus);

}  // namespace trellis::spec
