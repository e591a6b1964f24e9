// Fused rotary position embedding (RoPE) on bf16 activations, one pass: each
// element of x is read once and out written once; the fp32 cos/sin table is
// small and stays in cache. Backward is the same rotation by -angle.
// kernels/ref/rope_ref.h takes the same fp32 steps on the host, so results
// match FloatToBf16 of the reference bit for bit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace trellis::kernels {

// x holds `rows` rows (tokens), each of `heads` heads of `head_dim` features; row r starts at
// x + r * x_row_stride (elements), its heads contiguous (head h at h * head_dim). Row r is at
// position r % seq_len. cos, sin: fp32 [>= seq_len, head_dim / 2] contiguous.
// out is contiguous [rows, heads, head_dim] and must not overlap x. With half = head_dim / 2,
// x1 = x[.., i], x2 = x[.., half + i], c = cos[pos, i], s = sin[pos, i]:
//   forward (inverse = false): out[i] = x1*c - x2*s ; out[half+i] = x1*s + x2*c
//   inverse = true (the backward: rotation by -angle):
//                              out[i] = x1*c + x2*s ; out[half+i] = -x1*s + x2*c
// each product and sum an fp32 operation rounded once (the _rn intrinsics, no fma contraction),
// the result rounded to bf16 at the end.
// Needs head_dim even and > 0, heads > 0, seq_len > 0, rows >= 0 (0: nothing to do) and
// x_row_stride >= heads * head_dim. 8 elements move per access when half % 8 == 0,
// x_row_stride % 8 == 0 and x, out, cos, sin are 16-byte aligned; otherwise one at a time.
void Rope(const __nv_bfloat16* x, int64_t x_row_stride, int64_t rows, int64_t seq_len, int heads,
          int head_dim, const float* cos, const float* sin, bool inverse, __nv_bfloat16* out,
          cudaStream_t stream);

}  // namespace trellis::kernels
