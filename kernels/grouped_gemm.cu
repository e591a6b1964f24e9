// Grouped GEMM: argument checks and dispatch, and the kMmaSync main loop (the
// Hopper one is in grouped_gemm_wgmma.cu).
//
// kMmaSync: tensor cores through mma.sync m16n8k16 (bf16 in, fp32
// accumulate). 256 threads per block compute a 128 x 128 tile; 8 warps as
// 2 (m) x 4 (n), each 64 x 32. K advances 32 at a time through a 4-stage
// cp.async pipeline (64 KiB of shared memory, 2 blocks per SM). Shared rows
// are 64 bytes; 16-byte chunks are XOR-swizzled so ldmatrix reads 8 rows
// without bank conflicts.
#include "kernels/grouped_gemm.h"

#include <string>

#include "kernels/grouped_gemm_wgmma.h"
#include "kernels/launch_util.cuh"
#include "kernels/ref/tile_map.h"

namespace trellis::kernels {
namespace {

constexpr int kBM = kGroupedGemmTileM, kBN = kGroupedGemmTileN, kBK = 32;
constexpr int kStages = 4;
constexpr int kThreads = 256;
constexpr int kMaxExperts = 1024;
constexpr int kTileElems = (kBM + kBN) * kBK;
constexpr int kSmemBytes = kStages * kTileElems * 2;

// Element offset of 16-byte chunk c (0..3) of row r in a [rows][32] tile.
__device__ __forceinline__ int Swizzle(int r, int c) { return r * kBK + ((c ^ ((r >> 1) & 3)) * 8); }

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void LdMatrixX4(uint32_t addr, uint32_t& r0, uint32_t& r1,
                                           uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

__device__ __forceinline__ void Mma(float* c, const uint32_t* a, const uint32_t* b) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

struct Problem {
  const __nv_bfloat16* x;
  const __nv_bfloat16* w;
  const int32_t* offsets;
  __nv_bfloat16* out;
  int num_experts, n, k;
};

// Copies k-slice kt of the tile's A rows (x) and B rows (w[e]) into one stage.
__device__ __forceinline__ void LoadStage(const Problem& p, __nv_bfloat16* stage, int64_t a_row0,
                                          int a_rows, const __nv_bfloat16* w_e, int b_row0,
                                          int kt) {
  const int k0 = kt * kBK;
#pragma unroll
  for (int i = 0; i < (kBM * kBK / 8) / kThreads; ++i) {
    const int idx = threadIdx.x + i * kThreads, r = idx / 4, c = idx % 4;
    const bool ok = r < a_rows && k0 + c * 8 < p.k;
    const __nv_bfloat16* src = ok ? p.x + (a_row0 + r) * p.k + k0 + c * 8 : p.x;
    CpAsync16(SmemAddr(stage + Swizzle(r, c)), src, ok);
  }
#pragma unroll
  for (int i = 0; i < (kBN * kBK / 8) / kThreads; ++i) {
    const int idx = threadIdx.x + i * kThreads, r = idx / 4, c = idx % 4;
    const bool ok = b_row0 + r < p.n && k0 + c * 8 < p.k;
    const __nv_bfloat16* src = ok ? w_e + static_cast<int64_t>(b_row0 + r) * p.k + k0 + c * 8 : p.w;
    CpAsync16(SmemAddr(stage + kBM * kBK + Swizzle(r, c)), src, ok);
  }
}

__device__ __forceinline__ void ComputeStage(const __nv_bfloat16* stage, int warp_m, int warp_n,
                                             int lane, float (&acc)[4][4][4]) {
  const __nv_bfloat16* a_tile = stage;
  const __nv_bfloat16* b_tile = stage + kBM * kBK;
#pragma unroll
  for (int ks = 0; ks < kBK / 16; ++ks) {
    uint32_t a[4][4], b[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = warp_m * 64 + i * 16 + (lane % 16), c = ks * 2 + lane / 16;
      LdMatrixX4(SmemAddr(a_tile + Swizzle(r, c)), a[i][0], a[i][1], a[i][2], a[i][3]);
    }
#pragma unroll
    for (int pair = 0; pair < 2; ++pair) {
      const int r = warp_n * 32 + pair * 16 + (lane % 8) + (lane / 16) * 8;
      const int c = ks * 2 + (lane / 8) % 2;
      LdMatrixX4(SmemAddr(b_tile + Swizzle(r, c)), b[2 * pair][0], b[2 * pair][1],
                 b[2 * pair + 1][0], b[2 * pair + 1][1]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) Mma(acc[i][j], a[i], b[j]);
    }
  }
}

__device__ void RunTile(const Problem& p, const int* tile_starts, int n_tiles, int tile,
                        __nv_bfloat16* smem) {
  const ref::TileCoord t = ref::TileAt(tile_starts, p.num_experts, n_tiles, tile);
  const int64_t row0 = p.offsets[t.expert] + static_cast<int64_t>(t.m_tile) * kBM;
  const int rows = min(kBM, p.offsets[t.expert + 1] - static_cast<int>(row0));
  const int col0 = t.n_tile * kBN;
  const __nv_bfloat16* w_e = p.w + static_cast<int64_t>(t.expert) * p.n * p.k;
  const int kt_count = (p.k + kBK - 1) / kBK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_m = warp / 4, warp_n = warp % 4;

  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < kt_count) LoadStage(p, smem + s * kTileElems, row0, rows, w_e, col0, s);
    CpAsyncCommit();
  }
  for (int kt = 0; kt < kt_count; ++kt) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();  // stage kt is in; stage kt - 1 is free for the next load
    const int next = kt + kStages - 1;
    if (next < kt_count) LoadStage(p, smem + (next % kStages) * kTileElems, row0, rows, w_e, col0, next);
    CpAsyncCommit();
    ComputeStage(smem + (kt % kStages) * kTileElems, warp_m, warp_n, lane, acc);
  }
  CpAsyncWait<0>();
  __syncthreads();  // the next tile's loads may overwrite every stage

#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = warp_m * 64 + i * 16 + lane / 4 + half * 8;
      if (r >= rows) continue;
      __nv_bfloat16* dst = p.out + (row0 + r) * p.n;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int col = col0 + warp_n * 32 + j * 8 + 2 * (lane % 4);
        if (col < p.n) {
          *reinterpret_cast<__nv_bfloat162*>(dst + col) =
              __floats2bfloat162_rn(acc[i][j][2 * half], acc[i][j][2 * half + 1]);
        }
      }
    }
  }
}

template <TileSchedule kSchedule>
__global__ void __launch_bounds__(kThreads, 2) GroupedGemmKernel(Problem p, int* tile_counter) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ int tile_starts[kMaxExperts + 1];
  __shared__ int next_tile[2];
  auto* smem = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  const int n_tiles = (p.n + kBN - 1) / kBN;
  if (threadIdx.x == 0) {
    int sum = 0;
    tile_starts[0] = 0;
    for (int e = 0; e < p.num_experts; ++e) {
      sum += ref::ExpertTiles(p.offsets[e + 1] - p.offsets[e], p.n, kBM, kBN);
      tile_starts[e + 1] = sum;
    }
    if (kSchedule == TileSchedule::kDynamic) next_tile[0] = atomicAdd(tile_counter, 1);
  }
  __syncthreads();
  const int total = tile_starts[p.num_experts];
  if (kSchedule == TileSchedule::kDynamic) {
    int slot = 0;
    for (int tile = next_tile[0]; tile < total; tile = next_tile[slot]) {
      // Ask for the following tile now; RunTile's barriers publish it.
      if (threadIdx.x == 0) next_tile[slot ^ 1] = atomicAdd(tile_counter, 1);
      RunTile(p, tile_starts, n_tiles, tile, smem);
      slot ^= 1;
    }
  } else {
    for (int tile = blockIdx.x; tile < total; tile += gridDim.x) {
      RunTile(p, tile_starts, n_tiles, tile, smem);
    }
  }
}

template <TileSchedule kSchedule>
int ResidentBlocks() {
  static const int blocks = [] {
    TRELLIS_CUDA_CHECK(cudaFuncSetAttribute(GroupedGemmKernel<kSchedule>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            kSmemBytes));
    int per_sm = 0, device = 0, sms = 0;
    TRELLIS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, GroupedGemmKernel<kSchedule>, kThreads, kSmemBytes));
    TRELLIS_CUDA_CHECK(cudaGetDevice(&device));
    TRELLIS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return per_sm * sms;
  }();
  return blocks;
}

template <TileSchedule kSchedule>
void Launch(const Problem& p, int64_t total_rows, int* counter, cudaStream_t stream,
            int max_blocks) {
  int grid = ResidentBlocks<kSchedule>();  // also sets the shared-memory attribute
  if (kSchedule == TileSchedule::kPerTile) {
    const int64_t m_tiles = (total_rows + kBM - 1) / kBM + p.num_experts;  // upper bound
    grid = static_cast<int>(m_tiles * ((p.n + kBN - 1) / kBN));
  } else if (max_blocks > 0 && max_blocks < grid) {
    grid = max_blocks;
  }
  if (kSchedule == TileSchedule::kDynamic) {
    TRELLIS_CUDA_CHECK(cudaMemsetAsync(counter, 0, sizeof(int), stream));
  }
  GroupedGemmKernel<kSchedule><<<grid, kThreads, kSmemBytes, stream>>>(p, counter);
  TRELLIS_CHECK_LAUNCH();
}

}  // namespace

void GroupedGemm(const __nv_bfloat16* x, const __nv_bfloat16* w, const int32_t* offsets,
                 int num_experts, int64_t total_rows, int n, int k, __nv_bfloat16* out,
                 TileSchedule schedule, void* workspace, cudaStream_t stream, int max_blocks,
                 GroupedGemmMainLoop main_loop) {
  Require(num_experts > 0 && num_experts <= kMaxExperts,
          "GroupedGemm: num_experts must be in [1, " + std::to_string(kMaxExperts) + "]");
  Require(n > 0 && k > 0 && n % 8 == 0 && k % 8 == 0,
          "GroupedGemm: n and k must be positive multiples of 8 (got n=" + std::to_string(n) +
              ", k=" + std::to_string(k) + ")");
  Require(total_rows >= 0 && total_rows < (int64_t{1} << 31), "GroupedGemm: total_rows out of range");
  Require(IsAligned(x, 16) && IsAligned(w, 16) && IsAligned(out, 16),
          "GroupedGemm: x, w and out must be 16-byte aligned");
  Require(schedule != TileSchedule::kDynamic || (workspace && IsAligned(workspace, 16)),
          "GroupedGemm: the dynamic schedule needs a 16-byte aligned workspace");
  if (total_rows == 0) return;
  auto* counter = static_cast<int*>(workspace);
  if (main_loop != GroupedGemmMainLoop::kMmaSync) {
    const detail::WgmmaArgs args{x,       w,
                                 offsets, num_experts,
                                 total_rows, n,
                                 k,       out,
                                 schedule == TileSchedule::kDynamic,
                                 schedule == TileSchedule::kPerTile,
                                 counter, stream,
                                 max_blocks};
    detail::GroupedGemmWgmma(args, main_loop == GroupedGemmMainLoop::kWgmma128 ? 128 : 256);
    return;
  }
  const Problem p{x, w, offsets, out, num_experts, n, k};
  switch (schedule) {
    case TileSchedule::kStatic:
      Launch<TileSchedule::kStatic>(p, total_rows, counter, stream, max_blocks);
      break;
    case TileSchedule::kDynamic:
      Launch<TileSchedule::kDynamic>(p, total_rows, counter, stream, max_blocks);
      break;
    case TileSchedule::kPerTile:
      Launch<TileSchedule::kPerTile>(p, total_rows, counter, stream, max_blocks);
      break;
  }
}

}  // namespace trellis::kernels
