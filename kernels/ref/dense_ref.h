// fp32 references for the matrix kernels (double accumulation inside dot
// products): the grouped expert GEMM and Muon's batched Newton-Schulz.
#pragma once

#include <cstdint>

namespace trellis::kernels::ref {

// out[r, :] = x[r, :] @ w[e]^T for offsets[e] <= r < offsets[e + 1].
// x is [offsets[E], k], w is [E, n, k] (torch's [out, in] per expert), out [offsets[E], n].
void GroupedGemmRef(const float* x, const float* w, const int32_t* offsets, int num_experts,
                    int n, int k, float* out);

// Muon's quintic Newton-Schulz coefficients.
inline constexpr float kNsA = 3.4445f, kNsB = -4.7750f, kNsC = 2.0315f;
inline constexpr float kNsEps = 1e-7f;

// For each of the `batch` [m, n] matrices of g: X = G / (||G||_F + eps),
// transposed when m > n; `steps` times X <- aX + (bA + cA^2)X with A = XX^T;
// transposed back into out [batch, m, n].
void NewtonSchulzRef(const float* g, int batch, int m, int n, int steps, float* out);

}  // namespace trellis::kernels::ref
