#include "trainer_core/data/corpus_chunks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "trainer_core/checkpoint/xxhash64.h"

namespace trellis::train {
namespace {

// The reference: each chunk hashed on its own, from a copy of its tokens.
template <typename Id>
std::vector<uint64_t> ChunkSumsByCopy(const std::vector<Id>& tokens, uint64_t chunk_tokens) {
  std::vector<uint64_t> sums;
  for (size_t begin = 0; begin < tokens.size(); begin += chunk_tokens) {
    const size_t end = std::min(tokens.size(), begin + chunk_tokens);
    const std::vector<Id> chunk(tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                                tokens.begin() + static_cast<std::ptrdiff_t>(end));
    sums.push_back(Xxh64Of(chunk.data(), sizeof(Id) * chunk.size()));
  }
  return sums;
}

template <typename Id>
void ExpectChunksMatchTheReference(std::mt19937_64& rng, uint32_t vocab) {
  for (int trial = 0; trial < 20; ++trial) {
    const uint64_t count = 1 + rng() % 5000, chunk_tokens = 1 + rng() % 700;
    std::vector<Id> tokens(count);
    for (auto& t : tokens) t = static_cast<Id>(rng() % vocab);
    const int width = sizeof(Id);
    const std::vector<uint64_t> sums = ChunkChecksums(tokens.data(), width, count, chunk_tokens);
    ASSERT_EQ(sums, ChunkSumsByCopy(tokens, chunk_tokens)) << count << " / " << chunk_tokens;
    ASSERT_EQ(sums.size(), ChunkCount(count, chunk_tokens));
    const int threads = 1 + static_cast<int>(rng() % 8);
    const ChunkCheck check =
        CheckChunks(tokens.data(), width, count, chunk_tokens, sums.data(), threads);
    EXPECT_EQ(check.first_bad_chunk, sums.size()) << threads << " threads";
    EXPECT_EQ(check.largest_token, *std::max_element(tokens.begin(), tokens.end()));
  }
}

TEST(CorpusChunksTest, ChunkSumsAndTheParallelCheckMatchTheReference) {
  std::mt19937_64 rng(std::random_device{}());
  ExpectChunksMatchTheReference<uint16_t>(rng, 65536);
  ExpectChunksMatchTheReference<uint32_t>(rng, 1 << 24);  // ids of a vocab over 65536
}

// Of several corrupt chunks the first is named, whichever thread found which.
TEST(CorpusChunksTest, TheFirstCorruptChunkIsNamedOnAnyNumberOfThreads) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<uint16_t> tokens(10000);
  for (auto& t : tokens) t = static_cast<uint16_t>(rng() % 30000);
  const uint64_t chunk_tokens = 97;
  std::vector<uint64_t> sums = ChunkChecksums(tokens.data(), 2, tokens.size(), chunk_tokens);
  const uint64_t first = 1 + rng() % 50;
  sums[first] ^= 1;
  sums[first + 7] ^= 1;
  sums.back() ^= 1;
  for (int threads : {1, 2, 3, 8, 16})
    EXPECT_EQ(CheckChunks(tokens.data(), 2, tokens.size(), chunk_tokens, sums.data(), threads)
                  .first_bad_chunk,
              first)
        << threads << " threads";
  EXPECT_GE(CorpusCheckThreads(), 1);
  EXPECT_LE(CorpusCheckThreads(), 16);
}

}  // namespace
}  // namespace trellis::train
