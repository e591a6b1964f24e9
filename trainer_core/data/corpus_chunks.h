#pragma once
// The tokens of a version-2 corpus file are checksummed in chunks of
// `chunk_tokens` tokens (the last may be shorter) with XXH64, so that a
// reader checks them at memory speed and on several threads at once, where
// version 1's FNV-1a over the whole file ran one byte after another (about
// 0.6 GB/s) and held up every start of every rank (corpus.h has the
// layout). Tokens are `width` bytes each: 2 (u16) or 4 (u32). Torch-free.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trellis::train {

// Tokens per chunk in the files this build writes: 512 KiB of u16 ids, so
// that a chunk's check for ids out of range finds it still in the core's cache.
inline constexpr uint64_t kCorpusChunkTokens = uint64_t{1} << 18;

// Number of chunks of `tokens` tokens.
uint64_t ChunkCount(uint64_t tokens, uint64_t chunk_tokens);

// XXH64 of each chunk's bytes.
std::vector<uint64_t> ChunkChecksums(const void* tokens, int width, uint64_t count,
                                     uint64_t chunk_tokens);

struct ChunkCheck {
  uint64_t first_bad_chunk;  // the first chunk whose checksum differs; ChunkCount when none
  uint32_t largest_token;    // over every chunk
};
// Checks each chunk of `tokens` against `sums` on up to `threads` threads.
ChunkCheck CheckChunks(const void* tokens, int width, uint64_t count, uint64_t chunk_tokens,
                       const uint64_t* sums, int threads);

// A version-2 corpus's checksum, its identity: XXH64 of its `documents`
// boundaries, then its `chunks` chunk checksums, as stored.
uint64_t CorpusIdentity(const uint64_t* doc_starts, uint64_t documents, const uint64_t* chunk_sums,
                        uint64_t chunks);

// Threads for CheckChunks: the CPUs this process may run on, at most 16.
int CorpusCheckThreads();

}  // namespace trellis::train
