// RMSNorm over the last dimension of [rows, h] bf16 activations, with the
// pre-norm transformer's residual add fused in front, forward and backward,
// one pass over the rows each (LibTorch's fused rms_norm runs a second pass
// over the rows for the weight's gradient, and the add is a pass of its own):
//   forward:  y = bf16(x + a)          (a null: no add, y is x and not written)
//             rstd = 1 / sqrt(mean(y^2) + eps)   fp32, from the bf16 y
//             out = bf16(y * rstd * w)
//   backward: n = y * rstd, dn = g_out * w, c = mean(dn * n)
//             g_y = bf16(rstd * (dn - n * c) + g_res)   (g_res null: 0)
//             g_w = sum over rows of g_out * n           fp32
// Everything inside is fp32. g_w is summed per block of rows into a workspace,
// then over the blocks in a fixed order: the same bits on every run of a device.
// Needs h % 8 == 0, 8 <= h <= kRmsNormMaxHidden, 16-byte aligned pointers
// (rows of 8-element vectors); outputs must not overlap inputs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace trellis::kernels {

inline constexpr int64_t kRmsNormMaxHidden = 4096;

// Whether the kernels take rows of h (the trainer falls back to ATen otherwise).
bool RmsNormSupports(int64_t h);

void RmsNormForward(const __nv_bfloat16* x, const __nv_bfloat16* a, const __nv_bfloat16* w,
                    int64_t rows, int64_t h, float eps, __nv_bfloat16* y, __nv_bfloat16* out,
                    float* rstd, cudaStream_t stream);

// fp32 elements of the workspace RmsNormBackward needs for rows of h.
int64_t RmsNormBackwardWorkspace(int64_t rows, int64_t h);

// workspace: RmsNormBackwardWorkspace(rows, h) floats (per-block sums of g_w).
void RmsNormBackward(const __nv_bfloat16* g_out, const __nv_bfloat16* g_res, const __nv_bfloat16* y,
                     const __nv_bfloat16* w, const float* rstd, int64_t rows, int64_t h,
                     __nv_bfloat16* g_y, float* g_w, float* workspace, cudaStream_t stream);

}  // namespace trellis::kernels
