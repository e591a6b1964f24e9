// The routed experts' weight gradients summed straight into fp32 (the
// expert_wgrad fusion of trainer_core): one cuBLAS GEMM per expert reads the
// fp32 gradient as its C, bf16 in, fp32 accumulate and out. No bf16 gradient
// is written and no separate pass adds it into fp32 (that pass moved 10 bytes
// per weight per micro-batch). The experts are spread over a few internal
// streams forked from and joined back to the caller's, so that GEMMs of
// one expert's size (too few tiles for the device) run side by side.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace trellis::kernels {

// For expert g (rows[g] rows; the experts' rows lie end to end from row 0 of
// dy and x, both row-major bf16 with leading dimensions ld_dy and ld_x) and
// each part p < parts (the projections that one GEMM computed side by side,
// e.g. gate and up):
//   C = acc + p * part_stride + g * expert_stride, fp32 [m, n] row-major,
//   C (= with overwrite, else +=) dy_g[:, p*m : (p+1)*m]^T @ x_g.
// An expert with no rows leaves C alone, or zeroes it with overwrite.
struct ExpertWgrad {
  const __nv_bfloat16* dy = nullptr;  // [sum(rows), ld_dy], ld_dy >= parts * m
  int64_t ld_dy = 0;
  const __nv_bfloat16* x = nullptr;  // [sum(rows), ld_x], ld_x >= n
  int64_t ld_x = 0;
  const int64_t* rows = nullptr;  // host array of `experts` counts
  int experts = 0;
  int64_t m = 0, n = 0;
  int parts = 1;
  float* acc = nullptr;
  int64_t expert_stride = 0, part_stride = 0;  // elements; C's of different (g, p) never overlap
  bool overwrite = false;
};

// `meanwhile`, if given, runs after the GEMMs are queued on the lanes and
// before `stream` waits for them: what it queues on `stream` (e.g. the input
// gradient's GEMM) runs beside them.
void ExpertWgradFp32(const ExpertWgrad& args, cudaStream_t stream,
                     const std::function<void()>& meanwhile = nullptr);

// The runs [begin, end) of neighbouring experts with no rows, in order: what
// an overwriting call zeroes, one memset per run and part.
std::vector<std::pair<int, int>> EmptyRuns(const int64_t* rows, int experts);

}  // namespace trellis::kernels
