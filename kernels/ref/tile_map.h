// Tile numbering of the grouped GEMM, shared by the CUDA kernel and the host
// (tests, references): one source of truth for which tile is which.
//
// Expert e owns rows offsets[e] .. offsets[e + 1] of x and of the output. Its
// output [M_e, N] is cut into ceil(M_e / bm) x ceil(N / bn) tiles. Tiles are
// numbered expert by expert, then m-tile, then n-tile (n fastest, so tiles
// that run at the same time share the rows of x and the expert's weights in
// L2). tile_starts[e] is the number of the first tile of expert e;
// tile_starts[E] is the total. Empty experts own no tiles.
#pragma once

#include <cstdint>
#include <vector>

#if defined(__CUDACC__)
#define TRELLIS_HD __host__ __device__ __forceinline__
#else
#define TRELLIS_HD inline
#endif

namespace trellis::kernels::ref {

struct TileCoord {
  int expert;
  int m_tile;
  int n_tile;
};

TRELLIS_HD int CeilDiv(int a, int b) { return (a + b - 1) / b; }

// Tiles of one expert with `rows` rows.
TRELLIS_HD int ExpertTiles(int rows, int n, int bm, int bn) {
  return CeilDiv(rows, bm) * CeilDiv(n, bn);
}

// The tile with number `tile` (0 <= tile < tile_starts[num_experts]).
TRELLIS_HD TileCoord TileAt(const int* tile_starts, int num_experts, int n_tiles, int tile) {
  int lo = 0, hi = num_experts;  // find the last e with tile_starts[e] <= tile
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (tile_starts[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const int local = tile - tile_starts[lo];
  return TileCoord{lo, local / n_tiles, local % n_tiles};
}

// Host side: tile_starts[E + 1] from offsets[E + 1].
std::vector<int> GroupedTileStarts(const int32_t* offsets, int num_experts, int n, int bm, int bn);

// The static persistent schedule: block b of `grid` runs tiles b, b + grid, ...
std::vector<int> StaticTilesOfBlock(int num_tiles, int grid, int block);

}  // namespace trellis::kernels::ref
