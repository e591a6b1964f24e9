#include "kernels/ref/rope_ref.h"

namespace trellis::kernels::ref {

// Each product is a named float so that it rounds on its own; x86-64 builds
// have no fma to contract into unless -mfma or -march says so.
void RopeRef(const float* x, int64_t x_row_stride, int64_t rows, int64_t seq_len, int heads,
             int head_dim, const float* cos, const float* sin, bool inverse, float* out) {
  const int half = head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const float* c = cos + r % seq_len * half;
    const float* s = sin + r % seq_len * half;
    for (int h = 0; h < heads; ++h) {
      const float* xh = x + r * x_row_stride + int64_t{h} * head_dim;
      float* oh = out + (r * heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const float x1 = xh[i], x2 = xh[half + i];
        const float x1c = x1 * c[i], x2s = x2 * s[i], x1s = x1 * s[i], x2c = x2 * c[i];
        oh[i] = inverse ? x1c + x2s : x1c - x2s;
        oh[half + i] = inverse ? -x1s + x2c : x1s + x2c;
      }
    }
  }
}

}  // namespace trellis::kernels::ref
