// CPU reference of kernels/rope.h: the same fp32 steps in the same order,
// each rounded once, on inputs that hold bf16 values. Outputs stay fp32; the
// kernel stores FloatToBf16 of them, bit for bit.
#pragma once

#include <cstdint>

namespace trellis::kernels::ref {

// Arguments and layout as Rope's (kernels/rope.h), out contiguous [rows, heads, head_dim]:
//   forward: out[i] = x1*c - x2*s ;  out[half+i] = x1*s + x2*c
//   inverse: out[i] = x1*c + x2*s ;  out[half+i] = -(x1*s) + x2*c
void RopeRef(const float* x, int64_t x_row_stride, int64_t rows, int64_t seq_len, int heads,
             int head_dim, const float* cos, const float* sin, bool inverse, float* out);

}  // namespace trellis::kernels::ref
