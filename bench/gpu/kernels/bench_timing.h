// Timing and reporting for trellis-kernel-bench: CUDA events around each rep,
// warm-up first, median of the reps; one Row per measurement.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"

namespace trellis::bench {

struct Row {
  std::string kernel, variant;
  double ms = 0, gbps = 0, tflops = 0;
  double fraction_of_peak = 0;   // of the same-run copy bandwidth or matmul peak
  double ratio_vs_pytorch = 0;   // PyTorch's time / ours (> 1: ours is faster); 0: n/a
  std::string note;
};

// Median milliseconds of `reps` runs of fn on `stream` after `warmup` runs.
// `before` runs outside the timed region of each rep (e.g. to start contention).
inline double MedianMs(const std::function<void()>& fn, cudaStream_t stream, int warmup = 3,
                       int reps = 20, const std::function<void()>& before = nullptr) {
  cudaEvent_t start, stop;
  TRELLIS_CUDA_CHECK(cudaEventCreate(&start));
  TRELLIS_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) {
    if (before) before();
    fn();
  }
  TRELLIS_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> times;
  for (int i = 0; i < reps; ++i) {
    if (before) before();
    TRELLIS_CUDA_CHECK(cudaEventRecord(start, stream));
    fn();
    TRELLIS_CUDA_CHECK(cudaEventRecord(stop, stream));
    TRELLIS_CUDA_CHECK(cudaEventSynchronize(stop));
    TRELLIS_CUDA_CHECK(cudaGetLastError());
    float ms = 0;
    TRELLIS_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
    TRELLIS_CUDA_CHECK(cudaDeviceSynchronize());
  }
  TRELLIS_CUDA_CHECK(cudaEventDestroy(start));
  TRELLIS_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct Peaks {
  double copy_gbps = 0;    // device-to-device copy, bytes read + written
  double matmul_tflops = 0;  // bf16 8192^3
};

// The benchmark groups (bench_rows.cc); each appends its rows.
void BenchFp8(const Peaks& peaks, std::vector<Row>& rows);
void BenchAccumulate(const Peaks& peaks, std::vector<Row>& rows);
void BenchMoePermute(const Peaks& peaks, std::vector<Row>& rows);
void BenchGroupedGemm(const Peaks& peaks, std::vector<Row>& rows);
void BenchNewtonSchulz(const Peaks& peaks, std::vector<Row>& rows);

}  // namespace trellis::bench
