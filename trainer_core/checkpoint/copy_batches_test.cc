#include "trainer_core/checkpoint/copy_batches.h"

#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

namespace trellis::train {
namespace {

using Batches = std::vector<std::vector<CopyPiece>>;

int64_t BatchBytes(const std::vector<CopyPiece>& batch, const std::vector<CopiedTensor>& t) {
  int64_t bytes = 0;
  for (const CopyPiece& p : batch) bytes += p.count * t[p.tensor].element_bytes;
  return bytes;
}

TEST(CopyBatchesTest, SmallTensorsShareABatchAndALongOneIsCut) {
  // 4 + 8 + 16 bytes fit one batch of 32; 100 fp32 elements (400 bytes) take
  // 4 more bytes of it, then batches of 8 elements, then the rest.
  const std::vector<CopiedTensor> t = {{1, 4}, {2, 4}, {4, 4}, {100, 4}, {1, 2}};
  const Batches b = CopyBatches(t, 32);
  ASSERT_EQ(b.size(), 14u);
  EXPECT_EQ(b[0].size(), 4u);
  EXPECT_EQ(b[0][3].tensor, 3);
  EXPECT_EQ(b[0][3].count, 1);
  EXPECT_EQ(b[1].size(), 1u);
  EXPECT_EQ(b[1][0].first, 1);
  EXPECT_EQ(b[1][0].count, 8);
  // 100 = 1 + 12 * 8 + 3: the last 3 share their batch with the fp16 tensor.
  EXPECT_EQ(b[13].size(), 2u);
  EXPECT_EQ(b[13][0].count, 3);
  EXPECT_EQ(b[13][1].tensor, 4);
}

TEST(CopyBatchesTest, ANonContiguousTensorIsOnePieceAndALongOneABatchOfItsOwn) {
  const std::vector<CopiedTensor> t = {{2, 4}, {100, 4, false}, {2, 4}, {3, 4, false}};
  const Batches b = CopyBatches(t, 32);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].size(), 1u);
  ASSERT_EQ(b[1].size(), 1u);
  EXPECT_EQ(b[1][0].tensor, 1);
  EXPECT_EQ(b[1][0].count, 100);
  // 8 + 12 bytes: the small non-contiguous one joins the batch after.
  ASSERT_EQ(b[2].size(), 2u);
  EXPECT_EQ(b[2][1].tensor, 3);
  EXPECT_EQ(b[2][1].count, 3);
}

TEST(CopyBatchesTest, EmptyTensorsAreLeftOutAndBadSizesRefused) {
  EXPECT_TRUE(CopyBatches({{0, 4}, {0, 2}}, 64).empty());
  EXPECT_THROW(CopyBatches({{1, 4}}, 0), std::invalid_argument);
  EXPECT_THROW(CopyBatches({{1, 0}}, 64), std::invalid_argument);
  // An element larger than a batch still goes, one to a batch.
  const Batches b = CopyBatches({{3, 16}}, 8);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[2][0].first, 2);
}

// On random states: every element of every tensor once, in order; no batch
// over the limit but one piece that cannot be cut.
TEST(CopyBatchesTest, RandomStatesAreCoveredOnceInOrderWithinTheLimit) {
  std::mt19937 rng(std::random_device{}());
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<CopiedTensor> t(std::uniform_int_distribution<int>(0, 30)(rng));
    for (auto& x : t) {
      x.elements = std::uniform_int_distribution<int64_t>(0, 5000)(rng);
      x.element_bytes = int64_t{1} << std::uniform_int_distribution<int>(0, 3)(rng);
      x.contiguous = std::uniform_int_distribution<int>(0, 9)(rng) != 0;
    }
    const int64_t limit = std::uniform_int_distribution<int64_t>(1, 4096)(rng);
    const Batches batches = CopyBatches(t, limit);
    int tensor = 0;
    int64_t next = 0;
    for (const auto& batch : batches) {
      ASSERT_FALSE(batch.empty());
      const bool one_uncut =
          batch.size() == 1 && (batch[0].count == 1 || !t[batch[0].tensor].contiguous);
      if (!one_uncut) {
        EXPECT_LE(BatchBytes(batch, t), limit) << "trial " << trial;
      }
      for (const CopyPiece& p : batch) {
        while (tensor < static_cast<int>(t.size()) && next == t[tensor].elements) {
          ++tensor;
          next = 0;
        }
        ASSERT_EQ(p.tensor, tensor) << "trial " << trial;
        ASSERT_EQ(p.first, next) << "trial " << trial;
        ASSERT_GT(p.count, 0);
        if (!t[tensor].contiguous) {
          EXPECT_EQ(p.count, t[tensor].elements);
        }
        next += p.count;
      }
    }
    while (tensor < static_cast<int>(t.size()) && next == t[tensor].elements) {
      ++tensor;
      next = 0;
    }
    EXPECT_EQ(tensor, static_cast<int>(t.size())) << "trial " << trial << ": elements left";
  }
}

}  // namespace
}  // namespace trellis::train
