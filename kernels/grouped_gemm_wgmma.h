// Internal: the Hopper (wgmma + TMA) main loop of GroupedGemm
// (kernels/grouped_gemm.h has the contract; grouped_gemm.cu checks the
// arguments and dispatches here). Not part of the public API.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace trellis::kernels::detail {

struct WgmmaArgs {
  const __nv_bfloat16* x;
  const __nv_bfloat16* w;
  const int32_t* offsets;
  int num_experts;
  int64_t total_rows;
  int n, k;
  __nv_bfloat16* out;
  bool dynamic;             // atomic tile counter (else fixed stride)
  bool one_block_per_tile;  // grid = upper bound of the tile count
  int* counter;             // the dynamic schedule's tile counter
  cudaStream_t stream;
  int max_blocks;
};

// tile_n: 256 (128 x 256 tiles, 4 stages) or 128 (128 x 128 tiles, 6 stages).
void GroupedGemmWgmma(const WgmmaArgs& args, int tile_n);

}  // namespace trellis::kernels::detail
