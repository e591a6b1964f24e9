// Muon's orthogonalization for the expert matrices a rank owns, in one batched
// pass with no communication: for each of the `batch` [m, n] fp32 matrices G,
// X = bf16(G / (||G||_F + 1e-7)), transposed when m > n; 5 (or `steps`) times
// X <- aX + (bA + cA^2)X with A = XX^T, (a, b, c) = (3.4445, -4.7750, 2.0315);
// the result (transposed back) is written as fp32 [batch, m, n]. The matrix
// products are bf16 with fp32 accumulation, each one strided-batched cuBLASLt
// call over the whole batch (kernels/ref/dense_ref.h has the fp32 reference).
// The last step computes X' = (B + aI)X (aI added to B in bf16). With
// fused_output that product writes the fp32 output directly and the conversion
// pass goes away; it is off by default until it has been measured on a GPU
// (its first version never ran: a missing plan), and falls back to the bf16
// product + conversion pass if cuBLASLt refuses it. Each matrix's sum of
// squares is added in a fixed order (no atomics): the same input gives the
// same bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace trellis::kernels {

class BatchedNewtonSchulz {
 public:
  // Allocates the bf16 work buffers and plans the three products for this shape.
  BatchedNewtonSchulz(int batch, int m, int n, bool fused_output = false);
  ~BatchedNewtonSchulz();
  BatchedNewtonSchulz(const BatchedNewtonSchulz&) = delete;
  BatchedNewtonSchulz& operator=(const BatchedNewtonSchulz&) = delete;

  // g and out: device fp32 [batch, m, n] (may alias).
  void Run(const float* g, float* out, cudaStream_t stream, int steps = 5);

  // Muon's apply straight from the bf16 result, with no fp32 result in memory:
  // value (fp32 [batch, m, n], not aliasing g) = value * decay + step * X and
  // copy = bf16(value), by kernels/muon_update.h's ApplyUpdateBf16 (copy,
  // copy_row and copy_stride as there). The same bits as Run without
  // fused_output followed by ApplyUpdate.
  void RunApply(const float* g, float* value, float decay, float step, __nv_bfloat16* copy,
                int64_t copy_row, int64_t copy_stride, cudaStream_t stream, int steps = 5);

  // Whether the last product writes the fp32 output itself (else: a bf16 product and a
  // conversion pass; also after cuBLASLt refused the fp32-output product).
  bool FusedOutput() const;

  // Floating-point operations of one Run (the three products per step).
  double Flops(int steps = 5) const;

 private:
  struct Plan;
  // Normalizes g into the bf16 X and runs the steps. With fused_out (and
  // fused_output on) the last product writes the fp32 result there and it
  // returns true; else X holds the bf16 result.
  bool Iterate(const float* g, float* fused_out, cudaStream_t stream, int steps);

  int batch_, m_, n_;
  Plan* plan_ = nullptr;
};

}  // namespace trellis::kernels
