// The corpus header (common/corpus_header): the trainer reads it before the
// rest of a corpus file, and the controller reads it at submit from whatever
// file a run names. A header is accepted only with the size it implies, its
// arrays in order inside the file, its counts within their bounds, and its
// bytes as HeaderBytes writes them back.
//
// Input: the file's size (u64, little-endian), then its first bytes (zeros
// past the input, as a file shorter than the header would not be read).

#include <algorithm>
#include <cstring>
#include <string>

#include "common/corpus_header.h"
#include "fuzz/check.h"

namespace trellis::fuzz {

void FuzzCorpusHeader(const uint8_t* data, size_t size) {
  if (size < 8) return;
  uint64_t file_bytes = 0;
  std::memcpy(&file_bytes, data, 8);
  char head[kCorpusHeaderBytesV2] = {};
  std::memcpy(head, data + 8, std::min<size_t>(size - 8, sizeof head));
  CorpusHeader h;
  const std::string why = ParseCorpusHeader(head, file_bytes, &h);
  if (!why.empty()) return;
  FUZZ_CHECK(h.version == 1 || h.version == 2);
  FUZZ_CHECK(h.header_bytes == (h.version == 1 ? kCorpusHeaderBytesV1 : kCorpusHeaderBytesV2));
  FUZZ_CHECK(h.vocab >= 2 && h.vocab <= (h.version == 1 ? kCorpusMaxNarrowVocab : kCorpusMaxVocab));
  FUZZ_CHECK(h.documents <= h.tokens && h.tokens <= (uint64_t{1} << 40));
  if (h.version == 1) {
    FUZZ_CHECK(h.chunk_tokens == 0 && h.chunks == 0);
  } else {
    FUZZ_CHECK(h.chunk_tokens >= 1 && h.chunks * h.chunk_tokens >= h.tokens);
    FUZZ_CHECK(h.chunks == 0 || (h.chunks - 1) * h.chunk_tokens < h.tokens);
  }
  FUZZ_CHECK(h.DocStartsAt() <= h.ChunkSumsAt() && h.ChunkSumsAt() <= h.TokensAt() &&
             h.TokensAt() <= h.FileBytes() && h.FileBytes() == file_bytes);
  FUZZ_CHECK(HeaderBytes(h) == std::string(head, h.header_bytes));
}

}  // namespace trellis::fuzz
