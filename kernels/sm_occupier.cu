#include "kernels/sm_occupier.h"

#include <thread>

#include "kernels/launch_util.cuh"

namespace trellis::kernels {
namespace {

constexpr int kThreads = 128;

__device__ __forceinline__ unsigned SmId() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Launched with one block per SM of the device; the first num_sms blocks that
// land on distinct SMs hold them, the others leave at once.
__global__ void __launch_bounds__(kThreads) OccupyKernel(int num_sms, unsigned long long hold_ns,
                                                         int* claims, int num_device_sms,
                                                         int* started) {
  extern __shared__ unsigned char held_smem[];
  __shared__ int holds;
  if (threadIdx.x == 0) {
    const unsigned sm = SmId();
    holds = sm < static_cast<unsigned>(num_device_sms) && atomicCAS(&claims[sm], 0, 1) == 0 &&
            atomicAdd(&claims[num_device_sms], 1) < num_sms;
    if (holds) {
      held_smem[0] = 1;  // touch the shared memory we hold
      atomicAdd_system(started, 1);
      __threadfence_system();
    }
  }
  __syncthreads();
  if (!holds) return;
  const unsigned long long end = GlobalTimerNs() + hold_ns;
  while (GlobalTimerNs() < end) __nanosleep(500);
}

}  // namespace

SmOccupier::SmOccupier() {
  int device = 0;
  TRELLIS_CUDA_CHECK(cudaGetDevice(&device));
  TRELLIS_CUDA_CHECK(
      cudaDeviceGetAttribute(&num_device_sms_, cudaDevAttrMultiProcessorCount, device));
  TRELLIS_CUDA_CHECK(cudaMalloc(&claims_, (num_device_sms_ + 1) * sizeof(int)));
  TRELLIS_CUDA_CHECK(cudaHostAlloc(&started_, sizeof(int), cudaHostAllocMapped));
}

SmOccupier::~SmOccupier() {
  cudaFree(claims_);
  cudaFreeHost(started_);
}

void SmOccupier::Hold(int num_sms, std::chrono::microseconds hold, cudaStream_t stream,
                      long smem_bytes) {
  Require(num_sms >= 0 && num_sms <= num_device_sms_,
          "SmOccupier: num_sms must be in [0, " + std::to_string(num_device_sms_) + "]");
  if (num_sms == 0) return;
  int device = 0, max_smem = 0;
  TRELLIS_CUDA_CHECK(cudaGetDevice(&device));
  TRELLIS_CUDA_CHECK(
      cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const int smem = smem_bytes < 0 ? max_smem - 1024 : static_cast<int>(smem_bytes);
  Require(smem >= 1 && smem <= max_smem - 1024, "SmOccupier: smem_bytes out of range");
  TRELLIS_CUDA_CHECK(
      cudaFuncSetAttribute(OccupyKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int* started_dev = nullptr;
  TRELLIS_CUDA_CHECK(cudaHostGetDevicePointer(&started_dev, started_, 0));
  *reinterpret_cast<volatile int*>(started_) = 0;
  TRELLIS_CUDA_CHECK(cudaMemsetAsync(claims_, 0, (num_device_sms_ + 1) * sizeof(int), stream));
  OccupyKernel<<<num_device_sms_, kThreads, smem, stream>>>(
      num_sms, static_cast<unsigned long long>(hold.count()) * 1000ull, claims_, num_device_sms_,
      started_dev);
  TRELLIS_CHECK_LAUNCH();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (*reinterpret_cast<volatile int*>(started_) < num_sms) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw CudaError("SmOccupier: only " + std::to_string(*reinterpret_cast<volatile int*>(started_)) +
                      " of " + std::to_string(num_sms) + " SMs taken within 5 s");
    }
    std::this_thread::yield();
  }
}

}  // namespace trellis::kernels
