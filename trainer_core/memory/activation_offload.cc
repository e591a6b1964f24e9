#include "trainer_core/memory/activation_offload.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "common/model_layout/rank_host_memory.h"
#include "trainer_core/compat.h"
#include "trainer_core/error.h"
#include "trainer_core/memory/host_room.h"

namespace trellis::train {

int OffloadedLayers(double offload_fraction, int layers) {
  return spec::OffloadedLayers(offload_fraction, layers);
}

int64_t OffloadArenaBytes(int offloaded_layers, int64_t input_bytes) {
  return spec::OffloadArenaBytes(offloaded_layers, input_bytes, HostArena::kPage);
}

struct ActivationOffload::Slot {
  torch::Tensor host;     // the layer input's place in the arena
  torch::Tensor fetched;  // on the device, from Prefetch until Take
  bool stored = false;
#ifdef TRELLIS_TORCH_CUDA
  std::optional<at::cuda::CUDAEvent> ready;  // the fetch's copy has ended
#endif
};

#ifdef TRELLIS_TORCH_CUDA
namespace {
// The copies' stream: one per process, shared by every ActivationOffload.
c10::cuda::CUDAStream CopyStream() {
  static c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  return stream;
}
}  // namespace
#endif

ActivationOffload::ActivationOffload(int offloaded_layers, torch::Device device,
                                     std::vector<MemoryBound> shared_bounds)
    : layers_(offloaded_layers),
      device_(device),
      shared_bounds_(std::move(shared_bounds)),
      slots_(static_cast<size_t>(offloaded_layers)) {}

ActivationOffload::~ActivationOffload() {
#ifdef TRELLIS_TORCH_CUDA
  // No copy may still read or write the arena when it is freed.
  if (device_.is_cuda() && arena_) CopyStream().synchronize();
#endif
}

int64_t ActivationOffload::arena_bytes() const { return arena_ ? arena_->bytes() : 0; }

void ActivationOffload::EnsureArena(const torch::Tensor& like) {
  if (arena_) {
    const torch::Tensor& slot = slots_[0].host;
    if (like.sizes() != slot.sizes() || like.scalar_type() != slot.scalar_type())
      throw TrainError("activation offload: a layer input of shape " + c10::str(like.sizes()) +
                       " and dtype " + std::string(c10::toString(like.scalar_type())) +
                       " does not fit the arena's slots of " + c10::str(slot.sizes()) + " " +
                       std::string(c10::toString(slot.scalar_type())));
    return;
  }
  const int64_t bytes = OffloadArenaBytes(layers_, like.numel() * like.element_size());
  const int64_t slot_bytes = bytes / layers_;
  // Checked before it is touched: an arena the host can hold on paper
  // (overcommit) but not in fact would be filled page by page until the
  // kernel kills the rank, with no word of why. The ranks sharing a socket or
  // host make theirs at the same first forward: each counts them all.
  if (const std::string why =
          WhyItDoesNotFit(bytes, ReadMemoryBoundsCounted(shared_bounds_), /*keep_free=*/0);
      !why.empty())
    throw TrainError("activation offload: the host arena for " + std::to_string(layers_) +
                     " layers' inputs does not fit: " + why +
                     " (lower parallel.offload_fraction, or give the rank more memory)");
  auto arena = HostArena::Allocate(bytes, device_.is_cuda(), "activation offload",
                                   "lower parallel.offload_fraction");
  for (int i = 0; i < layers_; ++i)
    slots_[static_cast<size_t>(i)].host =
        torch::from_blob(arena->base() + i * slot_bytes, like.sizes(),
                         torch::TensorOptions().dtype(like.scalar_type()));
  arena_ = std::move(arena);
}

void ActivationOffload::Store(int layer, const torch::Tensor& x) {
  TORCH_CHECK(Offloads(layer), "ActivationOffload::Store: layer ", layer, " does not offload");
  EnsureArena(x);
  Slot& s = slots_[static_cast<size_t>(layer)];
  s.stored = true;
  s.fetched = torch::Tensor();  // a copy fetched earlier and never taken is stale now
#ifdef TRELLIS_TORCH_CUDA
  s.ready.reset();
#endif
#ifdef TRELLIS_TORCH_CUDA
  if (device_.is_cuda()) {
    const auto copy = CopyStream();
    at::cuda::CUDAEvent made;  // after the work that wrote x
    made.record(c10::cuda::getCurrentCUDAStream());
    made.block(copy);
    {
      c10::cuda::CUDAStreamGuard guard(copy);
      s.host.copy_(x, /*non_blocking=*/true);
    }
    x.record_stream(copy);  // x's memory is not reused until the copy has read it
    return;
  }
#endif
  s.host.copy_(x);
}

void ActivationOffload::Prefetch(int layer) {
  if (!Offloads(layer)) return;
  Slot& s = slots_[static_cast<size_t>(layer)];
  if (s.fetched.defined()) return;
  TORCH_CHECK(s.stored, "ActivationOffload: layer ", layer, "'s input fetched before it was stored");
#ifdef TRELLIS_TORCH_CUDA
  if (device_.is_cuda()) {
    const auto copy = CopyStream();
    s.fetched = torch::empty(s.host.sizes(), s.host.options().device(device_));
    // The memory came from the current stream's pool: the copy waits for
    // the work queued there so far (which may still use it under its
    // previous owner).
    at::cuda::CUDAEvent allocated;
    allocated.record(c10::cuda::getCurrentCUDAStream());
    allocated.block(copy);
    {
      c10::cuda::CUDAStreamGuard guard(copy);
      s.fetched.copy_(s.host, /*non_blocking=*/true);
    }
    s.fetched.record_stream(copy);
    s.ready.emplace();
    s.ready->record(copy);
    return;
  }
#endif
  s.fetched = s.host.clone();
}

torch::Tensor ActivationOffload::Take(int layer) {
  TORCH_CHECK(Offloads(layer), "ActivationOffload::Take: layer ", layer, " does not offload");
  Prefetch(layer);
  Slot& s = slots_[static_cast<size_t>(layer)];
#ifdef TRELLIS_TORCH_CUDA
  if (s.ready) {
    s.ready->block(c10::cuda::getCurrentCUDAStream());
    s.ready.reset();
  }
#endif
  return std::exchange(s.fetched, torch::Tensor());
}

}  // namespace trellis::train
