// Error handling shared by the kernels, their tests and benchmarks: every CUDA
// call is checked and a failure throws CudaError naming the call and place;
// bad sizes or pointers throw std::invalid_argument naming the argument.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace trellis::kernels {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void ThrowCudaError(cudaError_t err, const char* what, const char* file,
                                        int line) {
  throw CudaError(std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " +
                  cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

inline void Require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("trellis::kernels: " + message);
}

inline bool IsAligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace trellis::kernels

#define TRELLIS_CUDA_CHECK(expr)                                                      \
  do {                                                                                \
    const cudaError_t trellis_err_ = (expr);                                          \
    if (trellis_err_ != cudaSuccess) {                                                \
      ::trellis::kernels::ThrowCudaError(trellis_err_, #expr, __FILE__, __LINE__);    \
    }                                                                                 \
  } while (0)

// After a kernel launch: launch-configuration errors surface here.
#define TRELLIS_CHECK_LAUNCH() TRELLIS_CUDA_CHECK(cudaGetLastError())
