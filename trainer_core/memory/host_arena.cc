#include "trainer_core/memory/host_arena.h"

#include <cstdlib>
#include <cstring>

#include "trainer_core/compat.h"
#include "trainer_core/error.h"

namespace trellis::train {

std::unique_ptr<HostArena> HostArena::Allocate(int64_t bytes, bool page_lock,
                                               const std::string& purpose,
                                               const std::string& remedy) {
  std::unique_ptr<HostArena> arena(new HostArena());
  arena->bytes_ = Rounded(bytes);
  arena->base_ = std::aligned_alloc(kPage, static_cast<size_t>(std::max<int64_t>(arena->bytes_, kPage)));
  if (!arena->base_)
    throw TrainError(purpose + ": cannot allocate a host arena of " +
                     std::to_string(arena->bytes_) + " bytes (" + remedy + ")");
  std::memset(arena->base_, 0, static_cast<size_t>(arena->bytes_));
#ifdef TRELLIS_TORCH_CUDA
  if (page_lock && arena->bytes_ > 0) {
    const cudaError_t err = cudaHostRegister(arena->base_, static_cast<size_t>(arena->bytes_),
                                             cudaHostRegisterDefault);
    if (err != cudaSuccess)
      throw TrainError(purpose + ": cannot page-lock a host arena of " +
                       std::to_string(arena->bytes_) + " bytes: " + cudaGetErrorString(err) +
                       " (" + remedy + ", or raise the locked-memory limit)");
    arena->locked_ = true;
  }
#endif
  (void)page_lock;
  return arena;
}

HostArena::~HostArena() {
#ifdef TRELLIS_TORCH_CUDA
  if (locked_) cudaHostUnregister(base_);
#endif
  std::free(base_);
}

}  // namespace trellis::train
