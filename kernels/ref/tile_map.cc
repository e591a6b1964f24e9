#include "kernels/ref/tile_map.h"

namespace trellis::kernels::ref {

std::vector<int> GroupedTileStarts(const int32_t* offsets, int num_experts, int n, int bm,
                                   int bn) {
  std::vector<int> starts(num_experts + 1, 0);
  for (int e = 0; e < num_experts; ++e) {
    starts[e + 1] = starts[e] + ExpertTiles(offsets[e + 1] - offsets[e], n, bm, bn);
  }
  return starts;
}

std::vector<int> StaticTilesOfBlock(int num_tiles, int grid, int block) {
  std::vector<int> tiles;
  for (int t = block; t < num_tiles; t += grid) tiles.push_back(t);
  return tiles;
}

}  // namespace trellis::kernels::ref
