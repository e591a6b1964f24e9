#include "trainer_core/data/corpus_chunks.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "trainer_core/checkpoint/xxhash64.h"

namespace trellis::train {
namespace {

struct Chunk {
  uint64_t checksum;
  uint32_t largest_token;
};

template <typename Id>
uint32_t Largest(const Id* ids, uint64_t begin, uint64_t end) {
  Id largest = 0;
  for (uint64_t i = begin; i < end; ++i) largest = std::max(largest, ids[i]);
  return largest;
}

Chunk ScanChunk(const void* tokens, int width, uint64_t count, uint64_t chunk_tokens,
                uint64_t chunk) {
  const uint64_t begin = chunk * chunk_tokens, end = std::min(count, begin + chunk_tokens);
  // The largest id first: its pass reads the chunk in, the hash's finds it in cache.
  const uint32_t largest = width == 2 ? Largest(static_cast<const uint16_t*>(tokens), begin, end)
                                      : Largest(static_cast<const uint32_t*>(tokens), begin, end);
  const char* bytes = static_cast<const char*>(tokens);
  return {Xxh64Of(bytes + begin * width, (end - begin) * width), largest};
}

}  // namespace

uint64_t ChunkCount(uint64_t tokens, uint64_t chunk_tokens) {
  return (tokens + chunk_tokens - 1) / chunk_tokens;
}

std::vector<uint64_t> ChunkChecksums(const void* tokens, int width, uint64_t count,
                                     uint64_t chunk_tokens) {
  std::vector<uint64_t> sums(ChunkCount(count, chunk_tokens));
  const char* bytes = static_cast<const char*>(tokens);
  for (uint64_t c = 0; c < sums.size(); ++c) {
    const uint64_t begin = c * chunk_tokens, end = std::min(count, begin + chunk_tokens);
    sums[c] = Xxh64Of(bytes + begin * width, (end - begin) * width);
  }
  return sums;
}

ChunkCheck CheckChunks(const void* tokens, int width, uint64_t count, uint64_t chunk_tokens,
                       const uint64_t* sums, int threads) {
  const uint64_t chunks = ChunkCount(count, chunk_tokens);
  std::atomic<uint64_t> next{0}, first_bad{chunks};
  std::vector<uint32_t> largest(static_cast<size_t>(std::max(1, threads)), 0);
  // Each thread takes the next unchecked chunk, so a slow one (pages not
  // yet read from disk) holds up no other.
  auto work = [&](size_t t) {
    for (uint64_t c = next++; c < chunks; c = next++) {
      const Chunk chunk = ScanChunk(tokens, width, count, chunk_tokens, c);
      largest[t] = std::max(largest[t], chunk.largest_token);
      if (chunk.checksum != sums[c]) {
        uint64_t seen = first_bad.load();
        while (c < seen && !first_bad.compare_exchange_weak(seen, c)) {
        }
      }
    }
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < largest.size() && t < chunks; ++t) helpers.emplace_back(work, t);
  work(0);
  for (auto& h : helpers) h.join();
  return {first_bad.load(), *std::max_element(largest.begin(), largest.end())};
}

uint64_t CorpusIdentity(const uint64_t* doc_starts, uint64_t documents, const uint64_t* chunk_sums,
                        uint64_t chunks) {
  Xxh64 h;
  h.Update(doc_starts, 8 * documents);
  h.Update(chunk_sums, 8 * chunks);
  return h.Digest();
}

int CorpusCheckThreads() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int allowed = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0
                          ? CPU_COUNT(&cpus)
                          : static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(allowed, 1, 16);
}

}  // namespace trellis::train
