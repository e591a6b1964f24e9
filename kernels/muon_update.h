// Muon's element-wise passes, each one kernel over fp32 buffers of n
// elements (what ATen does in four to five passes):
//   MuonMomentum:  mom = grad + momentum * mom, then the Nesterov update
//                  update = grad + momentum * mom (with the new mom), written
//                  in the Newton-Schulz input dtype. With grad_scale (a device
//                  pointer to one float, the global-norm clip factor) grad is
//                  first grad * scale, rounded once: the same bits as scaling
//                  the gradient in a pass of its own, without that pass.
//   ApplyUpdate:   value = value * decay + step * ortho (decay = 1 - lr * wd,
//                  or 1 without weight decay; step = -lr * scale), and where
//                  copy is given, copy = bf16(value): the bf16 weights that
//                  forward reads, written in the same pass.
// Both are fused multiply-adds rounded once, as kernels/ref/optim_ref.h
// computes them, so results match the reference bit for bit. Pointers may
// have any alignment (16-byte aligned ones, and a bf16 output or copy 8-byte
// aligned, take the vector path; a strided copy also needs copy_row and
// copy_stride multiples of 4 unless they are equal).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace trellis::kernels {

// grad_scale: null (no scaling) or one float on the device, read there, so the
// host never waits for the clip factor.
void MuonMomentum(const float* grad, float* mom, float* update, int64_t n, float momentum,
                  const float* grad_scale, cudaStream_t stream);
void MuonMomentum(const float* grad, float* mom, __nv_bfloat16* update, int64_t n,
                  float momentum, const float* grad_scale, cudaStream_t stream);

void ApplyUpdate(float* value, const float* ortho, int64_t n, float decay, float step,
                 __nv_bfloat16* copy, cudaStream_t stream);

// As above, with copy's rows of copy_row elements starting copy_stride apart
// (copy_stride >= copy_row, n a multiple of copy_row): the bf16 weights in a layout
// where another matrix's rows sit between these (gate and up of one expert side by side).
// copy_row and copy_stride are ignored where copy is null; copy must not overlap value.
void ApplyUpdate(float* value, const float* ortho, int64_t n, float decay, float step,
                 __nv_bfloat16* copy, int64_t copy_row, int64_t copy_stride, cudaStream_t stream);

// ApplyUpdate with ortho in bf16, as Newton-Schulz computes it (kernels/
// newton_schulz.h's RunApply): each value exactly converted to fp32, so the
// same bits as converting ortho to fp32 first and calling ApplyUpdate, without
// that fp32 copy in memory. value is `batch` [rows, cols] matrices, contiguous;
// ortho holds each as [rows, cols], or as [cols, rows] where ortho_transposed
// (read through tiles). copy, copy_row and copy_stride as above, over
// value's flat index.
void ApplyUpdateBf16(float* value, const __nv_bfloat16* ortho, int64_t batch, int64_t rows,
                     int64_t cols, bool ortho_transposed, float decay, float step,
                     __nv_bfloat16* copy, int64_t copy_row, int64_t copy_stride,
                     cudaStream_t stream);

}  // namespace trellis::kernels
