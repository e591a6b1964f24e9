// Grouped expert GEMM, the forward of the MoE experts (like
// at::_grouped_mm(x, w.transpose(-2, -1), offs)):
//
//   out[r, :] = x[r, :] @ w[e]^T   for offsets[e] <= r < offsets[e + 1]
//
// Layouts (row-major, bf16): x [total_rows, k], w [E, n, k] (each expert's
// weight as torch stores a Linear weight, [out, in]), out [total_rows, n];
// offsets int32 [E + 1] on the device, offsets[0] = 0, non-decreasing,
// offsets[E] = total_rows (empty experts allowed). fp32 accumulation, bf16
// output rounded once. k and n must be multiples of 8 and the pointers
// 16-byte aligned.
//
// Output tiles (numbering: kernels/ref/tile_map.h) go to a persistent grid
// (SMs x resident blocks per SM):
//  - kStatic: block b runs tiles b, b + grid, b + 2 grid, ... A block that
//    starts late (its SM held by other work, e.g. NCCL) still runs its share.
//  - kDynamic: blocks take the next tile from an atomic counter, so the blocks
//    that run take over the work of those that start late.
//  - kPerTile: one block per tile (upper bound of the tile count), left to
//    the hardware block scheduler.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace trellis::kernels {

//
// The main loop (GroupedGemmMainLoop):
//  - kWgmma (the default): Hopper warpgroup MMA fed by TMA copies through a
//    4-stage mbarrier pipeline, a producer warpgroup and two consumer
//    warpgroups per block, 128 x 256 tiles, one block per SM.
//  - kWgmma128: the same with 128 x 128 tiles (6 stages).
//  - kMmaSync: the first version, Ampere-style mma.sync with a cp.async
//    pipeline, 128 x 128 tiles (kGroupedGemmTileM/N), 2 blocks per SM; kept
//    as the baseline of the benchmark.
enum class TileSchedule { kStatic, kDynamic, kPerTile };
enum class GroupedGemmMainLoop { kDefault, kWgmma, kWgmma128, kMmaSync };

// Tile of the kMmaSync main loop.
inline constexpr int kGroupedGemmTileM = 128;
inline constexpr int kGroupedGemmTileN = 128;

// Device scratch for the tile counter (bytes, 16-byte aligned pointer).
inline constexpr size_t kGroupedGemmWorkspaceBytes = 16;

// max_blocks > 0 caps the persistent grid (0: fill the device).
void GroupedGemm(const __nv_bfloat16* x, const __nv_bfloat16* w, const int32_t* offsets,
                 int num_experts, int64_t total_rows, int n, int k, __nv_bfloat16* out,
                 TileSchedule schedule, void* workspace, cudaStream_t stream, int max_blocks = 0,
                 GroupedGemmMainLoop main_loop = GroupedGemmMainLoop::kDefault);

}  // namespace trellis::kernels
