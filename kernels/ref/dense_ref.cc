#include "kernels/ref/dense_ref.h"

#include <cmath>
#include <vector>

namespace trellis::kernels::ref {
namespace {

// c[p, q] = sum_i a[p, i] * b[q, i]  (a [rows, k], b [cols, k], both row-major).
void MatMulNT(const float* a, const float* b, int rows, int cols, int k, float* c) {
  for (int p = 0; p < rows; ++p) {
    for (int q = 0; q < cols; ++q) {
      double sum = 0.0;
      for (int i = 0; i < k; ++i) sum += static_cast<double>(a[p * k + i]) * b[q * k + i];
      c[p * cols + q] = static_cast<float>(sum);
    }
  }
}

void Transpose(const float* a, int rows, int cols, float* t) {
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) t[c * rows + r] = a[r * cols + c];
  }
}

}  // namespace

void GroupedGemmRef(const float* x, const float* w, const int32_t* offsets, int num_experts,
                    int n, int k, float* out) {
  for (int e = 0; e < num_experts; ++e) {
    const int rows = offsets[e + 1] - offsets[e];
    MatMulNT(x + static_cast<int64_t>(offsets[e]) * k, w + static_cast<int64_t>(e) * n * k, rows,
             n, k, out + static_cast<int64_t>(offsets[e]) * n);
  }
}

void NewtonSchulzRef(const float* g, int batch, int m, int n, int steps, float* out) {
  const bool transposed = m > n;
  const int s = transposed ? n : m, l = transposed ? m : n;  // X is [s, l], s <= l
  std::vector<float> x(s * l), xt(s * l), a(s * s), b(s * s), bx(s * l);
  for (int i = 0; i < batch; ++i) {
    const float* gi = g + static_cast<int64_t>(i) * m * n;
    double sq = 0.0;
    for (int64_t j = 0; j < static_cast<int64_t>(m) * n; ++j) sq += double(gi[j]) * gi[j];
    const float inv = 1.0f / (static_cast<float>(std::sqrt(sq)) + kNsEps);
    if (transposed) {
      Transpose(gi, m, n, x.data());
    } else {
      x.assign(gi, gi + s * l);
    }
    for (float& v : x) v *= inv;
    for (int step = 0; step < steps; ++step) {
      MatMulNT(x.data(), x.data(), s, s, l, a.data());  // A = X X^T
      MatMulNT(a.data(), a.data(), s, s, s, b.data());  // A A^T = A^2 (A symmetric)
      for (int j = 0; j < s * s; ++j) b[j] = kNsB * a[j] + kNsC * b[j];
      Transpose(x.data(), s, l, xt.data());
      MatMulNT(b.data(), xt.data(), s, l, s, bx.data());  // B X
      for (int j = 0; j < s * l; ++j) x[j] = kNsA * x[j] + bx[j];
    }
    float* oi = out + static_cast<int64_t>(i) * m * n;
    if (transposed) {
      Transpose(x.data(), s, l, oi);
    } else {
      for (int j = 0; j < s * l; ++j) oi[j] = x[j];
    }
  }
}

}  // namespace trellis::kernels::ref
