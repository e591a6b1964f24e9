#pragma once
// training.deterministic: the same spec, weights and batches give the same
// losses bit for bit on every run (same machine kind, world, mesh and thread
// count). By default some CUDA kernels sum in an order that varies from run
// to run (on an H200, cuDNN's fused attention backward: the one kernel that
// changes), so two runs drift apart at rounding level and then, through
// discrete routing, further. Deterministic mode makes ATen pick its
// deterministic kernels (and refuse an op that has none, naming it) and gives
// cuBLAS a fixed workspace; what it costs is in
// bench/results/determinism-gpu-*.md. The rest of the trainer is
// deterministic by construction: MoE dispatch and combine only gather
// (model/moe_ops.h), gradients are summed in rank order (parallel/comm.h's
// ReduceScatter), and the few float all-reduces (loss, gradient norm) get
// the same sum from NCCL for the same world and algorithm (NVLS off).
// Measured on one GPU; not yet on several.
// Torch-free: the decision; trainer.cc applies it.

#include <string>

namespace trellis::train {

// cuBLAS's values of CUBLAS_WORKSPACE_CONFIG that make its results
// reproducible (and the only ones ATen's deterministic mode accepts).
inline constexpr const char* kDeterministicCublasWorkspace = ":4096:8";
inline constexpr const char* kSmallDeterministicCublasWorkspace = ":16:8";

struct CublasWorkspaceChoice {
  std::string set_to;   // a value to export before cuBLAS starts; "" keeps the current one
  std::string problem;  // why the current value cannot be used; "" when it can
};

// What training.deterministic does with CUBLAS_WORKSPACE_CONFIG, given its
// current value (nullptr: unset): unset or empty gets ":4096:8", either
// reproducible value is kept, anything else is refused (a user's own value
// is never overwritten).
CublasWorkspaceChoice ChooseCublasWorkspace(const char* current);

}  // namespace trellis::train
