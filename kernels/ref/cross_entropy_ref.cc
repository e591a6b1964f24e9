#include "kernels/ref/cross_entropy_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trellis::kernels::ref {

void CrossEntropyRowsRef(const float* logits, int64_t rows, int64_t vocab,
                         const int64_t* targets, double* loss, double* grad) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * vocab;
    double* g = grad + r * vocab;
    const int64_t t = targets[r];
    if (t == -1) {
      loss[r] = 0;
      std::fill(g, g + vocab, 0.0);
      continue;
    }
    const double m = *std::max_element(x, x + vocab);
    double s = 0;
    for (int64_t j = 0; j < vocab; ++j) s += std::exp(x[j] - m);
    const double lse = m + std::log(s);
    if (t < 0 || t >= vocab) {
      loss[r] = std::numeric_limits<double>::quiet_NaN();
      std::fill(g, g + vocab, 0.0);
      continue;
    }
    loss[r] = lse - x[t];
    for (int64_t j = 0; j < vocab; ++j) g[j] = std::exp(x[j] - lse);
    g[t] -= 1;
  }
}

}  // namespace trellis::kernels::ref
