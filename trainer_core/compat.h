#pragma once
// The only place that knows which LibTorch it is built against: 1.13 (Debian,
// CPU) or 2.x (the GPU machine). Everything else calls these helpers.

#include <torch/torch.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <ATen/ops/scaled_dot_product_attention.h>
#endif

// c10d, only in the translation units that talk to it (parallel/comm.cc).
#ifdef TRELLIS_COMPAT_C10D
#include <torch/csrc/distributed/c10d/Store.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#endif

namespace trellis::train::compat {

inline constexpr bool kTorch2 = TORCH_VERSION_MAJOR >= 2;

// softmax(q k^T / sqrt(d) masked) v, for q,k,v [B, heads, T, d] and a boolean
// mask [B, 1, T, T] (true = may attend). 2.x has a fused op that takes the
// mask; 1.13 has none, so it is written out (every row keeps its diagonal,
// so no row is fully masked).
inline torch::Tensor Attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& mask) {
#if TORCH_VERSION_MAJOR >= 2
  return at::scaled_dot_product_attention(q, k, v, mask);
#else
  double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
  scores = scores.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
#endif
}

// Matrix transpose of the last two dims (`mT` is 2.x only).
inline torch::Tensor MT(const torch::Tensor& x) { return x.transpose(-2, -1); }

inline bool CudaAvailable() { return torch::cuda::is_available(); }

// Waits for queued device work, so step timings measure the work itself.
inline void Synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

#ifdef TRELLIS_COMPAT_C10D
// What a process group implementation derives from: 2.x splits the user-facing
// ProcessGroup from its per-device Backends; 1.13 has ProcessGroup only.
#if TORCH_VERSION_MAJOR >= 2
using Backend = c10d::Backend;
#else
using Backend = c10d::ProcessGroup;
#endif

// NCCL exists only where LibTorch was built with CUDA (CMake defines
// USE_C10D_NCCL then); elsewhere asking for it is a clear error.
inline c10::intrusive_ptr<Backend> MakeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int size,
                                                 std::chrono::milliseconds timeout) {
#ifdef USE_C10D_NCCL
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#else
  (void)store, (void)rank, (void)size, (void)timeout;
  throw std::runtime_error("this LibTorch has no NCCL (built without CUDA)");
#endif
}
#endif  // TRELLIS_COMPAT_C10D

}  // namespace trellis::train::compat
