// Grouped GEMM main loop for Hopper (sm_90a): warpgroup MMA (wgmma) fed by the
// tensor memory accelerator (TMA).
//
// One block per SM, 384 threads = 3 warpgroups:
//  - warpgroup 0, the producer: one thread walks the block's tiles and, for
//    each 64-wide k step, waits until a shared-memory stage is free, then has
//    the TMA copy the A tile (128 rows of x) and the B tile (kBN rows of w[e])
//    into it, completing on the stage's "full" mbarrier. It gives its registers
//    to the consumers (setmaxnreg).
//  - warpgroups 1 and 2, the consumers: each owns 64 rows of the 128 x kBN
//    output tile, issues 4 wgmma m64nkBNk16 per stage (A and B straight from
//    shared memory, 128-byte swizzled as the TMA wrote them), keeps one stage's
//    MMAs in flight and frees the stage before through its "empty" mbarrier;
//    the epilogue rounds to bf16 and stores the expert's rows only.
// The producer runs up to kStages k steps ahead, across tile boundaries, so the
// next tile's loads overlap the epilogue. Tile ids reach the consumers through
// the stage that carries the tile's first k step (-1: no more tiles).
//
// Ragged experts: an A tile may run past its expert's rows into the next
// expert's (harmless: those output rows are not stored); past the end of x,
// and past k, the TMA fills zeros. Likewise B tiles past an expert's n rows
// read the next expert's weights (columns not stored) or zeros at the end.
#include "kernels/grouped_gemm_wgmma.h"

#include <cuda.h>  // CUtensorMap and the encode function's signature; no -lcuda

#include <mutex>
#include <string>

#include "kernels/launch_util.cuh"
#include "kernels/ref/tile_map.h"

namespace trellis::kernels::detail {
namespace {

constexpr int kBM = 128, kBK = 64;
constexpr int kThreads = 384;
constexpr int kConsumerWarps = 8;
constexpr int kMaxExperts = 1024;

template <int kBN>
struct Config {
  static constexpr int kABytes = kBM * kBK * 2;  // 16 KiB
  static constexpr int kBBytes = kBN * kBK * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kStages = (192 * 1024) / kStageBytes;  // 4 (kBN 256) or 6 (kBN 128)
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + alignment slack
};

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void BarrierInit(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddr(bar)), "r"(count));
}

__device__ __forceinline__ void BarrierArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(SmemAddr(bar)) : "memory");
}

__device__ __forceinline__ void BarrierArriveExpectTx(uint64_t* bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void BarrierWait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(SmemAddr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// 2-D TMA load of the box at (c0 = element along k, c1 = row) into shared memory.
__device__ __forceinline__ void TmaLoad(void* dst, const CUtensorMap* map, uint64_t* bar, int c0,
                                        int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(SmemAddr(bar)), "r"(c0), "r"(c1)
      : "memory");
}

// Shared-memory matrix descriptor of a K-major tile stored as the TMA writes
// it with 128-byte swizzle: rows of 64 bf16 (128 bytes), 8-row groups 1024
// bytes apart (stride byte offset), the leading byte offset unused for this
// layout, layout type 1 = 128B swizzle. The tile must be 1024-byte aligned;
// the k16 slices inside a row are reached by adding 32 bytes to the start.
__device__ __forceinline__ uint64_t SmemDesc(const void* tile) {
  const uint32_t addr = SmemAddr(tile);
  return static_cast<uint64_t>((addr & 0x3ffff) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void WgmmaFence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator registers across the async MMAs.
__device__ __forceinline__ void FenceOperand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// Register budgets per warpgroup role: 128 x 40 + 256 x 232 <= 64K registers.
__device__ __forceinline__ void ProducerRegs() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
}
__device__ __forceinline__ void ConsumerRegs() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
}

// D[64 x 256] += A[64 x 16] (shared, K-major) * B[256 x 16]^T (shared, K-major), fp32 accumulate
// (scale_d == 0: D = A * B, the accumulator is overwritten).
__device__ __forceinline__ void Wgmma256(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 128] += A[64 x 16] (shared, K-major) * B[128 x 16]^T (shared, K-major), fp32 accumulate
// (scale_d == 0: D = A * B, the accumulator is overwritten).
__device__ __forceinline__ void Wgmma128(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

template <int kBN>
__device__ __forceinline__ void Wgmma(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (kBN == 256) {
    Wgmma256(d, desc_a, desc_b, scale_d);
  } else {
    Wgmma128(d, desc_a, desc_b, scale_d);
  }
}

struct Problem {
  const int32_t* offsets;
  __nv_bfloat16* out;
  int num_experts, n, k;
};

struct Tile {
  int64_t row0;  // first row of x / out
  int rows;      // rows of the expert in this tile (1..128)
  int col0;      // first output column
  int b_row0;    // first row of w viewed as [E * n, k]
};

template <int kBN>
__device__ __forceinline__ Tile TileOf(const Problem& p, const int* tile_starts, int tile) {
  const ref::TileCoord t = ref::TileAt(tile_starts, p.num_experts, ref::CeilDiv(p.n, kBN), tile);
  const int64_t row0 = p.offsets[t.expert] + static_cast<int64_t>(t.m_tile) * kBM;
  const int rows = min(kBM, static_cast<int>(p.offsets[t.expert + 1] - row0));
  const int col0 = t.n_tile * kBN;
  return Tile{row0, rows, col0, t.expert * p.n + col0};
}

template <int kBN>
__device__ __forceinline__ void StoreTile(const Problem& p, const Tile& t, int consumer,
                                          const float* acc) {
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int r_base = consumer * 64 + warp * 16 + lane / 4;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = r_base + half * 8;
    if (r >= t.rows) continue;
    __nv_bfloat16* dst = p.out + (t.row0 + r) * p.n;
#pragma unroll
    for (int i = 0; i < kBN / 8; ++i) {
      const int col = t.col0 + i * 8 + 2 * (lane % 4);
      if (col < p.n) {  // n % 8 == 0, so col + 1 < n too
        *reinterpret_cast<__nv_bfloat162*>(dst + col) =
            __floats2bfloat162_rn(acc[4 * i + 2 * half], acc[4 * i + 2 * half + 1]);
      }
    }
  }
}

template <int kBN, bool kDynamic>
__global__ void __launch_bounds__(kThreads, 1)
    WgmmaGroupedGemmKernel(const __grid_constant__ CUtensorMap map_x,
                           const __grid_constant__ CUtensorMap map_w, Problem p,
                           int* tile_counter) {
  using C = Config<kBN>;
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full[C::kStages], empty[C::kStages];
  __shared__ int stage_tile[C::kStages];
  __shared__ int tile_starts[kMaxExperts + 1];
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});

  if (threadIdx.x == 0) {
    int sum = 0;
    tile_starts[0] = 0;
    for (int e = 0; e < p.num_experts; ++e) {
      sum += ref::ExpertTiles(p.offsets[e + 1] - p.offsets[e], p.n, kBM, kBN);
      tile_starts[e + 1] = sum;
    }
    for (int s = 0; s < C::kStages; ++s) {
      BarrierInit(&full[s], 1);
      BarrierInit(&empty[s], kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int total = tile_starts[p.num_experts];
  const int kt_count = ref::CeilDiv(p.k, kBK);

  if (threadIdx.x < 128) {  // producer warpgroup
    ProducerRegs();
    if (threadIdx.x != 0) return;
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_x)) : "memory");
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_w)) : "memory");
    int s = 0;
    uint32_t phase = 0;
    int tile = kDynamic ? atomicAdd(tile_counter, 1) : static_cast<int>(blockIdx.x);
    while (true) {
      if (tile >= total) {  // tell the consumers there is no more work
        BarrierWait(&empty[s], phase ^ 1);
        stage_tile[s] = -1;
        BarrierArrive(&full[s]);
        return;
      }
      const Tile t = TileOf<kBN>(p, tile_starts, tile);
      for (int kt = 0; kt < kt_count; ++kt) {
        BarrierWait(&empty[s], phase ^ 1);
        if (kt == 0) stage_tile[s] = tile;
        unsigned char* stage = smem + s * C::kStageBytes;
        BarrierArriveExpectTx(&full[s], C::kStageBytes);
        TmaLoad(stage, &map_x, &full[s], kt * kBK, static_cast<int>(t.row0));
        TmaLoad(stage + C::kABytes, &map_w, &full[s], kt * kBK, t.b_row0);
        if (++s == C::kStages) s = 0, phase ^= 1;
      }
      tile = kDynamic ? atomicAdd(tile_counter, 1) : tile + static_cast<int>(gridDim.x);
    }
  }

  // consumer warpgroups
  ConsumerRegs();
  const int consumer = threadIdx.x / 128 - 1;
  const int lane = threadIdx.x % 32;
  float acc[kBN / 2];
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i) acc[i] = 0.0f;  // overwritten by each tile's first MMA
  int s = 0;
  uint32_t phase = 0;
  while (true) {
    BarrierWait(&full[s], phase);
    const int tile = stage_tile[s];
    if (tile < 0) return;
    const Tile t = TileOf<kBN>(p, tile_starts, tile);
    int prev = 0;
    for (int kt = 0; kt < kt_count; ++kt) {
      if (kt > 0) BarrierWait(&full[s], phase);
      const unsigned char* stage = smem + s * C::kStageBytes;
      const uint64_t desc_a = SmemDesc(stage + consumer * 64 * kBK * 2);
      const uint64_t desc_b = SmemDesc(stage + C::kABytes);
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i) FenceOperand(acc[i]);
      WgmmaFence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        // +32 bytes per k16 slice: +2 in the descriptor's address field (16-byte units).
        Wgmma<kBN>(acc, desc_a + 2 * kk, desc_b + 2 * kk, (kt > 0 || kk > 0) ? 1 : 0);
      }
      WgmmaCommit();
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i) FenceOperand(acc[i]);
      if (kt > 0) {  // the previous stage's MMAs are done: hand it back
        WgmmaWait<1>();
        if (lane == 0) BarrierArrive(&empty[prev]);
      }
      prev = s;
      if (++s == C::kStages) s = 0, phase ^= 1;
    }
    WgmmaWait<0>();
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) FenceOperand(acc[i]);
    if (lane == 0) BarrierArrive(&empty[prev]);
    StoreTile<kBN>(p, t, consumer, acc);
  }
}

// cuTensorMapEncodeTiled through the runtime's driver entry point (no link
// against the driver library).
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiledFn EncodeTiled() {
  static EncodeTiledFn fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult found{};
    TRELLIS_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000,
                                                        cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || ptr == nullptr) {
      throw CudaError("GroupedGemm: the driver has no cuTensorMapEncodeTiled");
    }
    return reinterpret_cast<EncodeTiledFn>(ptr);
  }();
  return fn;
}

// Row-major bf16 [rows, cols] read in boxes of box_rows x 64, 128-byte swizzled;
// out-of-bounds elements read as zeros.
CUtensorMap MakeMap(const void* base, int64_t rows, int64_t cols, int box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2};
  const cuuint32_t box[2] = {kBK, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = EncodeTiled()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                                   const_cast<void*>(base), dims, strides, box, elem_strides,
                                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw CudaError("GroupedGemm: cuTensorMapEncodeTiled failed (" + std::to_string(r) + ")");
  }
  return map;
}

template <int kBN, bool kDynamic>
int SmCount() {
  static const int sms = [] {
    TRELLIS_CUDA_CHECK(cudaFuncSetAttribute(WgmmaGroupedGemmKernel<kBN, kDynamic>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            Config<kBN>::kSmemBytes));
    int device = 0, count = 0;
    TRELLIS_CUDA_CHECK(cudaGetDevice(&device));
    TRELLIS_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    return count;
  }();
  return sms;
}

template <int kBN, bool kDynamic>
void Launch(const CUtensorMap& map_x, const CUtensorMap& map_w, const Problem& p, int grid,
            int* counter, cudaStream_t stream) {
  WgmmaGroupedGemmKernel<kBN, kDynamic>
      <<<grid, kThreads, Config<kBN>::kSmemBytes, stream>>>(map_x, map_w, p, counter);
  TRELLIS_CHECK_LAUNCH();
}

template <int kBN>
void Run(const WgmmaArgs& a) {
  const CUtensorMap map_x = MakeMap(a.x, a.total_rows, a.k, kBM);
  const CUtensorMap map_w = MakeMap(a.w, static_cast<int64_t>(a.num_experts) * a.n, a.k, kBN);
  const Problem p{a.offsets, a.out, a.num_experts, a.n, a.k};
  const int sms = a.dynamic ? SmCount<kBN, true>() : SmCount<kBN, false>();  // sets smem limits
  int grid = sms;
  if (a.one_block_per_tile) {
    const int64_t m_tiles = (a.total_rows + kBM - 1) / kBM + a.num_experts;  // upper bound
    grid = static_cast<int>(m_tiles * ref::CeilDiv(a.n, kBN));
  } else if (a.max_blocks > 0 && a.max_blocks < grid) {
    grid = a.max_blocks;
  }
  if (a.dynamic) {
    TRELLIS_CUDA_CHECK(cudaMemsetAsync(a.counter, 0, sizeof(int), a.stream));
    Launch<kBN, true>(map_x, map_w, p, grid, a.counter, a.stream);
  } else {
    Launch<kBN, false>(map_x, map_w, p, grid, a.counter, a.stream);
  }
}

}  // namespace

void GroupedGemmWgmma(const WgmmaArgs& args, int tile_n) {
  Require(args.num_experts <= kMaxExperts, "GroupedGemm: too many experts");
  Require(static_cast<int64_t>(args.num_experts) * args.n < (int64_t{1} << 31),
          "GroupedGemm: num_experts * n must be < 2^31");
  if (tile_n == 256) {
    Run<256>(args);
  } else {
    Run<128>(args);
  }
}

}  // namespace trellis::kernels::detail
