#pragma once
// The only place that knows which LibTorch it is built against: 1.13 (Debian,
// CPU) or 2.x (the GPU machine). Everything else calls these helpers, here
// and in compat.h's two parts: compat_device_time.h (a step's laps, a
// collective's stamps) and compat_c10d.h (the process groups).

#include <torch/version.h>

#include <optional>

#include "trainer_core/torch_api.h"

#if TORCH_VERSION_MAJOR >= 2
#include <ATen/ops/scaled_dot_product_attention.h>
#endif
// Grouped GEMM over experts (CUTLASS on sm90; 2.8 on).
#if defined(__has_include)
#if __has_include(<ATen/ops/_grouped_mm.h>)
#include <ATen/ops/_grouped_mm.h>
#define TRELLIS_HAS_GROUPED_MM 1
#endif
#endif
// One fused kernel for RMSNorm forward and one for backward on CUDA (2.9 on;
// earlier rms_norm is the same chain of elementwise ops we write ourselves).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9)
#include <ATen/ops/rms_norm.h>
#define TRELLIS_HAS_FUSED_RMS_NORM 1
// And bf16 GEMMs that accumulate into an fp32 output (addmm's out_dtype).
#include <ATen/ops/addmm.h>
#define TRELLIS_HAS_ADDMM_OUT_DTYPE 1
#endif
// LibTorch built with CUDA (CMake defines it then): allocator statistics.
#ifdef TRELLIS_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace trellis::train::compat {

inline constexpr bool kTorch2 = TORCH_VERSION_MAJOR >= 2;

// ATen's deterministic kernels on or off, process-wide (an op without one
// throws). 2.1 on also fills every uninitialized tensor with NaN while they
// are on, by default: a memset per allocation, which only changes the
// results of a program that reads memory it never wrote; the trainer does
// not (bench/gpu/determinism.sh: two deterministic runs would then differ).
inline void SetDeterministicAlgorithms(bool on) {
  at::globalContext().setDeterministicAlgorithms(on, /*warn_only=*/false);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  at::globalContext().setDeterministicFillUninitializedMemory(false);
#endif
}

// Whether Attention can take k and v with fewer heads than q (grouped-query
// attention inside the fused op, LibTorch >= 2.5).
inline constexpr bool kAttentionGqa =
    TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5);

// softmax(q k^T / sqrt(d) masked) v, for q [B, heads, T, d], k and v
// [B, heads or (gqa) heads / g, T, d] and a boolean mask [B, 1, T, T]
// (true = may attend), or no mask: plain causal. 2.x has a fused op; without
// a mask it runs a causal flash kernel that never builds the T x T mask. 1.13
// has none, so it is written out (every row keeps its diagonal, so no row is
// fully masked). gqa needs kAttentionGqa.
inline torch::Tensor Attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& mask,
                               bool gqa = false) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
  if (!mask.defined())
    return at::scaled_dot_product_attention(q, k, v, {}, 0.0, true, std::nullopt, gqa);
  return at::scaled_dot_product_attention(q, k, v, mask, 0.0, false, std::nullopt, gqa);
#elif TORCH_VERSION_MAJOR >= 2
  TORCH_CHECK(!gqa, "Attention: grouped-query attention needs LibTorch >= 2.5");
  if (!mask.defined()) return at::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
  return at::scaled_dot_product_attention(q, k, v, mask);
#else
  TORCH_CHECK(!gqa, "Attention: grouped-query attention needs LibTorch >= 2.5");
  const int64_t t = q.size(-2);
  auto allowed = mask.defined()
                     ? mask
                     : torch::ones({t, t}, q.options().dtype(torch::kBool)).tril();
  double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
  scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
#endif
}

// RMSNorm as one fused kernel (forward and backward) where this LibTorch has
// one on the tensor's device; nullopt means "compose it yourself". Rounds
// once (x * rstd * w in fp32), where the composed form rounds x * rstd first.
inline std::optional<torch::Tensor> FusedRmsNorm(const torch::Tensor& x, const torch::Tensor& w,
                                                 double eps) {
#ifdef TRELLIS_HAS_FUSED_RMS_NORM
  if (x.is_cuda()) return at::rms_norm(x, {x.size(-1)}, w, eps);
#endif
  (void)x, (void)w, (void)eps;
  return std::nullopt;
}

// acc += a @ b for fp32 acc and bf16 a, b, as one GEMM that reads acc as its
// C (cuBLAS's fp32 output for bf16 inputs, on CUDA with LibTorch 2.9 on): no
// bf16 product rounded and added after. False where there is none (the
// caller multiplies and adds).
inline bool AddMmIntoFp32(const torch::Tensor& acc, const torch::Tensor& a,
                          const torch::Tensor& b) {
#ifdef TRELLIS_HAS_ADDMM_OUT_DTYPE
  if (acc.is_cuda() && acc.scalar_type() == torch::kFloat && a.scalar_type() == torch::kBFloat16 &&
      b.scalar_type() == torch::kBFloat16) {
    torch::Tensor out = acc;  // the same storage, written in place
    at::addmm_out(out, acc, a, b, torch::kFloat);
    return true;
  }
#endif
  (void)acc, (void)a, (void)b;
  return false;
}

// x [M, K] with rows grouped by expert (offs: int32 [E], cumulative ends of
// the groups, on the device) times w [E, K, N] -> [M, N], one launch for all
// experts and no host sync. Where it is missing (1.13, CPU) callers loop.
inline bool HasGroupedMm(const torch::Tensor& x) {
#ifdef TRELLIS_HAS_GROUPED_MM
  return x.is_cuda() && x.scalar_type() == torch::kBFloat16;
#else
  (void)x;
  return false;
#endif
}
inline torch::Tensor GroupedMm(const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& offs) {
#ifdef TRELLIS_HAS_GROUPED_MM
  return at::_grouped_mm(x, w, offs);
#else
  (void)w, (void)offs;
  TORCH_CHECK(false, "GroupedMm: this LibTorch has no _grouped_mm");
  return x;
#endif
}

// The CUDA caching allocator's counters for the current device: cudaMalloc
// retries after freeing cached blocks (cumulative), and the peaks of bytes
// allocated to tensors and reserved from the driver since ResetMemoryPeaks.
struct DeviceMemory {
  int64_t alloc_retries = 0, allocated_peak = 0, reserved_peak = 0;
};
inline std::optional<DeviceMemory> CudaMemory(const torch::Device& device) {
#ifdef TRELLIS_TORCH_CUDA
  if (!device.is_cuda()) return std::nullopt;
  namespace alloc = c10::cuda::CUDACachingAllocator;
  const auto stats = alloc::getDeviceStats(c10::cuda::current_device());
  const size_t all = 0;  // StatType::AGGREGATE (small and large pools together)
  return DeviceMemory{stats.num_alloc_retries, stats.allocated_bytes[all].peak,
                      stats.reserved_bytes[all].peak};
#else
  (void)device;
  return std::nullopt;
#endif
}
inline void ResetMemoryPeaks(const torch::Device& device) {
#ifdef TRELLIS_TORCH_CUDA
  if (device.is_cuda())
    c10::cuda::CUDACachingAllocator::resetPeakStats(c10::cuda::current_device());
#else
  (void)device;
#endif
}

// Matrix transpose of the last two dims (`mT` is 2.x only).
inline torch::Tensor MT(const torch::Tensor& x) { return x.transpose(-2, -1); }

inline bool CudaAvailable() { return torch::cuda::is_available(); }

// Makes `index` the current CUDA device (tensors sent to kCUDA, NCCL's
// communicators). A no-op in LibTorch builds without CUDA.
inline void SetCudaDevice(int index) {
#ifdef TRELLIS_TORCH_CUDA
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
#else
  (void)index;
#endif
}

// The current CUDA device's index (-1 in LibTorch builds without CUDA), for
// a thread of the rank's own that works with it.
inline int CurrentCudaDevice() {
#ifdef TRELLIS_TORCH_CUDA
  return c10::cuda::current_device();
#else
  return -1;
#endif
}

// The current CUDA device as a start-up log names it: "cuda:1 NVIDIA H200,
// PCI 0000:2a:00.0" (the bus id as sysfs and lspci write it); empty in
// LibTorch builds without CUDA.
inline std::string DescribeCurrentCudaDevice() {
#ifdef TRELLIS_TORCH_CUDA
  const auto index = c10::cuda::current_device();
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(index);
  char bus[32];
  std::snprintf(bus, sizeof(bus), "%04x:%02x:%02x.0", static_cast<unsigned>(p->pciDomainID),
                static_cast<unsigned>(p->pciBusID), static_cast<unsigned>(p->pciDeviceID));
  return "cuda:" + std::to_string(static_cast<int>(index)) + " " + p->name + ", PCI " + bus;
#else
  return "";
#endif
}

// Small device-to-host transfers on a step's path go through the host
// memory's device mapping: a kernel's stores, not a cudaMemcpy. A cudaMemcpy to
// the host queues on the copy engine behind any other device-to-host copy in
// flight, e.g. checkpoint.async's copy of the rank's state (6 GiB: 0.12 s, and
// more than a step for a large rank), and the step would wait for all of it
// (bench/results/checkpoint-copy-2026-12-05-mapped.md).
#ifdef TRELLIS_TORCH_CUDA
// Queues on the current stream the write of `src` (on the GPU) into `host`:
// page-locked (its device address is its host address under unified
// addressing), contiguous, src's dtype and element count. Wait for an event
// recorded after it before reading `host`, or freeing it.
inline void WriteToMappedHost(const torch::Tensor& src, const torch::Tensor& host) {
  TORCH_CHECK(src.is_cuda() && host.is_pinned() && host.is_contiguous() &&
                  host.scalar_type() == src.scalar_type() && host.numel() == src.numel(),
              "WriteToMappedHost: needs a GPU tensor and page-locked contiguous host memory of "
              "its dtype and size, got ",
              src.device(), " ", src.scalar_type(), " [", src.numel(), "] into ",
              host.scalar_type(), " [", host.numel(), "]", host.is_pinned() ? "" : ", pageable");
  // The device named, not looked up from the pointer: pinned memory is
  // reused across the devices of a process (ranks as threads in tests).
  auto on_device = at::for_blob(host.data_ptr(), src.sizes())
                       .target_device(src.device())
                       .options(src.options())
                       .make_tensor();
  // x * 1: an elementwise kernel, exact for every dtype (copy_ would be a cudaMemcpy).
  torch::mul_out(on_device, src, torch::scalar_tensor(1, src.options().device(torch::kCPU)));
}
#endif

// A small tensor's values on the host; on a GPU written through the mapping
// and waited for.
inline torch::Tensor ReadToHost(const torch::Tensor& t) {
#ifdef TRELLIS_TORCH_CUDA
  if (t.is_cuda()) {
    auto host = torch::empty(t.sizes(), t.options().device(torch::kCPU).pinned_memory(true));
    WriteToMappedHost(t.contiguous(), host);
    at::cuda::CUDAEvent written;
    written.record();
    written.synchronize();
    return host;
  }
#endif
  return t.cpu();
}

// Waits for queued device work, so step timings measure the work itself.
inline void Synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

}  // namespace trellis::train::compat
