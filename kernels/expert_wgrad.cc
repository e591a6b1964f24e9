// cuBLAS is column-major: a row-major [rows, ld] matrix is the column-major
// [ld, rows] one. With X = x_g and D = dy_g (row-major [k, n] and [k, m]),
// the row-major C [m, n] = D^T X is the column-major C^T [n, m] = Xc Dc^T:
// transa N on Xc ([n, k], ld_x), transb T on Dc ([m, k], ld_dy), ldc n. The
// parts of one expert are a strided batch: dy's columns m apart, C's
// part_stride apart, x shared (stride 0).
#include "kernels/expert_wgrad.h"

#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"

#define TRELLIS_CUBLAS_CHECK(expr)                                                   \
  do {                                                                               \
    const cublasStatus_t st_ = (expr);                                               \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                              \
      throw ::trellis::kernels::CudaError(std::string(#expr) +                       \
                                          " failed: " + cublasGetStatusString(st_)); \
    }                                                                                \
  } while (0)

namespace trellis::kernels {
namespace {

// Two lanes filled an H200 best for moe-bench's experts (bench/gpu/probes/
// expert_wgrad.py: 2.12 ms per layer and micro-batch on two streams, 2.58 on
// one, 2.33 on four).
constexpr int kLanes = 2;

// A device's side streams, each with its own cuBLAS handle, and the events
// that fork them from the caller's stream and join them back. Created on first
// use and kept for the process (destroying them at exit can outlive the CUDA
// runtime).
struct Lanes {
  std::mutex mu;  // one launch at a time uses the events
  std::array<cudaStream_t, kLanes> stream{};
  std::array<cublasHandle_t, kLanes> blas{};
  cudaEvent_t fork = nullptr;
  std::array<cudaEvent_t, kLanes> join{};
};

Lanes& LanesOf(int device) {
  static std::mutex mu;
  static auto* by_device = new std::map<int, std::unique_ptr<Lanes>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& lanes = (*by_device)[device];
  if (!lanes) {
    auto made = std::make_unique<Lanes>();
    TRELLIS_CUDA_CHECK(cudaEventCreateWithFlags(&made->fork, cudaEventDisableTiming));
    for (int l = 0; l < kLanes; ++l) {
      TRELLIS_CUDA_CHECK(cudaStreamCreateWithFlags(&made->stream[l], cudaStreamNonBlocking));
      TRELLIS_CUDA_CHECK(cudaEventCreateWithFlags(&made->join[l], cudaEventDisableTiming));
      TRELLIS_CUBLAS_CHECK(cublasCreate(&made->blas[l]));
      TRELLIS_CUBLAS_CHECK(cublasSetStream(made->blas[l], made->stream[l]));
    }
    lanes = std::move(made);
  }
  return *lanes;
}

bool FitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

void Validate(const ExpertWgrad& a) {
  const std::string me = "ExpertWgradFp32: ";
  Require(a.experts >= 0 && a.m >= 0 && a.n >= 0, me + "experts, m and n must be >= 0");
  Require(a.parts >= 1, me + "parts must be >= 1, got " + std::to_string(a.parts));
  Require(a.experts == 0 || a.rows != nullptr, me + "rows (host counts per expert) missing");
  for (int g = 0; g < a.experts; ++g)
    Require(FitsInt(a.rows[g]), me + "rows[" + std::to_string(g) + "] must be in [0, INT_MAX]");
  if (a.experts == 0 || a.m * a.n == 0) return;  // nothing to compute or zero
  Require(FitsInt(a.m) && FitsInt(a.n) && FitsInt(a.ld_dy) && FitsInt(a.ld_x),
          me + "m, n and the leading dimensions must fit cuBLAS's int");
  Require(a.ld_dy >= a.parts * a.m, me + "ld_dy must be >= parts * m (" +
                                        std::to_string(a.parts * a.m) + "), got " +
                                        std::to_string(a.ld_dy));
  Require(a.ld_x >= a.n,
          me + "ld_x must be >= n (" + std::to_string(a.n) + "), got " + std::to_string(a.ld_x));
  Require(a.acc != nullptr && a.dy != nullptr && a.x != nullptr, me + "acc, dy and x are required");
  Require(a.expert_stride >= 0 && a.part_stride >= 0, me + "strides must be >= 0");
  // Every (expert, part) owns m * n elements of its own.
  std::vector<int64_t> starts;
  for (int g = 0; g < a.experts; ++g)
    for (int p = 0; p < a.parts; ++p) starts.push_back(g * a.expert_stride + p * a.part_stride);
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i)
    Require(starts[i] - starts[i - 1] >= a.m * a.n,
            me + "the [m, n] outputs overlap: expert_stride " + std::to_string(a.expert_stride) +
                " and part_stride " + std::to_string(a.part_stride) + " place two " +
                std::to_string(starts[i] - starts[i - 1]) + " elements apart, m * n is " +
                std::to_string(a.m * a.n));
}

void Gemm(cublasHandle_t blas, const ExpertWgrad& a, int64_t first_row, int64_t k, float* c) {
  const float alpha = 1.0f, beta = a.overwrite ? 0.0f : 1.0f;
  const __nv_bfloat16* x = a.x + first_row * a.ld_x;
  const __nv_bfloat16* dy = a.dy + first_row * a.ld_dy;
  const int n = static_cast<int>(a.n), m = static_cast<int>(a.m), kk = static_cast<int>(k);
  if (a.parts == 1) {
    TRELLIS_CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, n, m, kk, &alpha, x,
                                      CUDA_R_16BF, static_cast<int>(a.ld_x), dy, CUDA_R_16BF,
                                      static_cast<int>(a.ld_dy), &beta, c, CUDA_R_32F, n,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  TRELLIS_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      blas, CUBLAS_OP_N, CUBLAS_OP_T, n, m, kk, &alpha, x, CUDA_R_16BF, static_cast<int>(a.ld_x), 0,
      dy, CUDA_R_16BF, static_cast<int>(a.ld_dy), a.m, &beta, c, CUDA_R_32F, n, a.part_stride,
      a.parts, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// An overwriting call leaves an expert without rows a zero gradient. Under
// concentrated routing many experts are empty (moe-bench: about 27 of 64 per
// layer), so their C's are zeroed a run of neighbours at a time, one memset
// per run and part, not one per expert and part (each about 9 us on an H200;
// bench/results/trainer-gpu-empty-experts-2026-12-03.md).
void ZeroEmptyExperts(const ExpertWgrad& a, cudaStream_t stream) {
  const size_t width = static_cast<size_t>(a.m * a.n) * sizeof(float);
  const size_t pitch = static_cast<size_t>(a.expert_stride) * sizeof(float);
  for (const auto& [begin, end] : EmptyRuns(a.rows, a.experts)) {
    const size_t height = static_cast<size_t>(end - begin);
    for (int p = 0; p < a.parts; ++p) {
      float* c = a.acc + begin * a.expert_stride + p * a.part_stride;
      if (height == 1 || pitch == width) {  // one block of memory
        TRELLIS_CUDA_CHECK(cudaMemsetAsync(c, 0, width * height, stream));
      } else {  // C's with gaps between them, which keep their contents
        TRELLIS_CUDA_CHECK(cudaMemset2DAsync(c, pitch, 0, width, height, stream));
      }
    }
  }
}

}  // namespace

std::vector<std::pair<int, int>> EmptyRuns(const int64_t* rows, int experts) {
  std::vector<std::pair<int, int>> runs;
  for (int g = 0; g < experts; ++g) {
    if (rows[g] != 0) continue;
    if (!runs.empty() && runs.back().second == g)
      ++runs.back().second;
    else
      runs.emplace_back(g, g + 1);
  }
  return runs;
}

void ExpertWgradFp32(const ExpertWgrad& a, cudaStream_t stream,
                     const std::function<void()>& meanwhile) {
  Validate(a);
  if (a.experts == 0 || a.m * a.n == 0) {
    if (meanwhile) meanwhile();
    return;
  }
  int device = 0;
  TRELLIS_CUDA_CHECK(cudaGetDevice(&device));
  Lanes& lanes = LanesOf(device);
  std::lock_guard<std::mutex> lock(lanes.mu);
  TRELLIS_CUDA_CHECK(cudaEventRecord(lanes.fork, stream));
  for (int l = 0; l < kLanes; ++l)
    TRELLIS_CUDA_CHECK(cudaStreamWaitEvent(lanes.stream[l], lanes.fork, 0));
  // The caller's stream waits for every lane however this call ends, so that
  // nothing it frees next is still being read.
  struct Join {
    Lanes& lanes;
    cudaStream_t stream;
    ~Join() {
      for (int l = 0; l < kLanes; ++l) {
        cudaEventRecord(lanes.join[l], lanes.stream[l]);
        cudaStreamWaitEvent(stream, lanes.join[l], 0);
      }
    }
  } join{lanes, stream};
  // Each expert goes to the lane with the fewest rows so far.
  std::array<int64_t, kLanes> load{};
  int64_t first_row = 0;
  for (int g = 0; g < a.experts; ++g) {
    const int64_t k = a.rows[g];
    if (k > 0) {
      const int l = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
      Gemm(lanes.blas[l], a, first_row, k, a.acc + g * a.expert_stride);
      load[l] += k;
    }
    first_row += k;
  }
  if (a.overwrite) {
    const int l = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    ZeroEmptyExperts(a, lanes.stream[l]);
  }
  if (meanwhile) meanwhile();
}

}  // namespace trellis::kernels
