// Holds N streaming multiprocessors for a while, to reproduce what NCCL's
// kernels do to compute kernels that share the GPU. Each holding block claims
// a distinct SM (by its %smid), takes the shared memory it is given (by
// default all a block may have, so no other block that uses shared memory
// fits beside it) and spins on the global timer until the hold ends.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>

namespace trellis::kernels {

class SmOccupier {
 public:
  SmOccupier();
  ~SmOccupier();
  SmOccupier(const SmOccupier&) = delete;
  SmOccupier& operator=(const SmOccupier&) = delete;

  // Launches the holding blocks on `stream` and returns once all `num_sms` of
  // them run (throws CudaError if they are not all resident within 5 s, e.g.
  // because the GPU is busy). The hold counts from each block's start.
  // smem_bytes < 0: the per-block maximum.
  void Hold(int num_sms, std::chrono::microseconds hold, cudaStream_t stream,
            long smem_bytes = -1);

 private:
  int* claims_ = nullptr;   // device: one flag per SM, then the claim count
  int* started_ = nullptr;  // mapped host memory: holders running
  int num_device_sms_ = 0;
};

}  // namespace trellis::kernels
