#include "trainer_core/checkpoint/copy_batches.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trellis::train {

std::vector<std::vector<CopyPiece>> CopyBatches(const std::vector<CopiedTensor>& tensors,
                                                int64_t batch_bytes) {
  if (batch_bytes <= 0) throw std::invalid_argument("CopyBatches: batch_bytes must be positive");
  std::vector<std::vector<CopyPiece>> batches;
  int64_t room = 0;  // bytes the last batch may still take
  for (int i = 0; i < static_cast<int>(tensors.size()); ++i) {
    const CopiedTensor& t = tensors[i];
    if (t.elements <= 0) continue;
    if (t.element_bytes <= 0)
      throw std::invalid_argument("CopyBatches: tensor " + std::to_string(i) + " has elements of " +
                                  std::to_string(t.element_bytes) + " bytes");
    for (int64_t first = 0; first < t.elements;) {
      const int64_t left = t.elements - first;
      int64_t fits = std::max<int64_t>(room, 0) / t.element_bytes;
      if (batches.empty() || fits == 0 || (!t.contiguous && fits < left)) {
        batches.emplace_back();
        room = batch_bytes;
        fits = room / t.element_bytes;
      }
      // A non-contiguous tensor whole; else what fits, at least one element.
      const int64_t count = t.contiguous ? std::min(left, std::max<int64_t>(1, fits)) : left;
      batches.back().push_back({i, first, count});
      room -= count * t.element_bytes;
      first += count;
    }
  }
  return batches;
}

}  // namespace trellis::train
