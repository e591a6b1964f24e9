#pragma once
// Activation offload (parallel.offload_fraction): with activation
// checkpointing a layer keeps only its input for the recompute in backward;
// for the first `layers` layers that input goes to a host arena instead of
// staying on the device. Forward copies it out after the work that made it;
// backward brings it back one layer ahead of its recompute, so the copy runs
// while the layer after it (in backward order) computes. The layers left on
// the device are the last ones, which backward needs first.
//
// The arena is one host allocation, sized at the first copy (one slot per
// offloaded layer, every slot the size of a layer input), written once from
// the CPU before any copy (a page first touched by a device-to-host copy can
// be placed in device memory on a machine whose GPU memory is a NUMA node),
// and on CUDA page-locked in place, without the pinned allocator's rounding
// to a power of two (memory/host_arena.h). Copies run on a stream of their own.

#include <cstdint>
#include <memory>
#include <vector>

#include "trainer_core/memory/host_arena.h"
#include "trainer_core/memory/host_room.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

// How many of `layers` offload: the fraction rounded down (0.86 of 74 is 63).
// The gate counts the same (common/model_layout/rank_host_memory.h).
int OffloadedLayers(double offload_fraction, int layers);

// The arena's size for `offloaded_layers` inputs of `input_bytes` each: a
// slot per layer, each rounded up to a page (HostArena::kPage).
int64_t OffloadArenaBytes(int offloaded_layers, int64_t input_bytes);

class ActivationOffload {
 public:
  // `shared_bounds`: this rank's memory bounds with the ranks that make
  // their arenas from each at once (memory/host_room.h); empty: its own only.
  ActivationOffload(int offloaded_layers, torch::Device device,
                    std::vector<MemoryBound> shared_bounds = {});
  ~ActivationOffload();
  ActivationOffload(const ActivationOffload&) = delete;
  ActivationOffload& operator=(const ActivationOffload&) = delete;

  bool Offloads(int layer) const { return layer >= 0 && layer < layers_; }
  // Forward: copies `x` (layer `layer`'s input) into its slot. The device
  // tensor may be dropped at once: its memory is not reused before the copy
  // has read it.
  void Store(int layer, const torch::Tensor& x);
  // Backward: starts bringing `layer`'s input back to the device; nothing if
  // it does not offload or is on its way already.
  void Prefetch(int layer);
  // Backward: `layer`'s input on the device, ready for work on the current
  // stream (started here if Prefetch was not called).
  torch::Tensor Take(int layer);
  // Host bytes held (0 until the first Store).
  int64_t arena_bytes() const;

 private:
  struct Slot;
  void EnsureArena(const torch::Tensor& like);

  int layers_;
  torch::Device device_;
  std::vector<MemoryBound> shared_bounds_;
  std::unique_ptr<HostArena> arena_;
  std::vector<Slot> slots_;
};

}  // namespace trellis::train
