#pragma once
// The header of a corpus file (layout: trainer_core/data/corpus.h). Read by
// the trainer before the rest of the file, and by the controller at submit,
// so that a [model] run naming a file that is not a corpus, or one too wide
// for its model, is refused before it waits in the queue. Dependency-free.

#include <cstdint>
#include <string>

namespace trellis {

inline constexpr char kCorpusMagic[8] = {'T', 'R', 'L', 'S', 'C', 'O', 'R', 'P'};
inline constexpr uint32_t kCorpusVersion = 2;  // written; 1 is read too
inline constexpr uint64_t kCorpusHeaderBytesV1 = 40, kCorpusHeaderBytesV2 = 48;
// Token ids are u16 where the vocab has at most 65536 of them, else u32
// (version 2 only): modern tokenizers have 100k-200k.
inline constexpr uint32_t kCorpusMaxNarrowVocab = 65536;
inline constexpr uint32_t kCorpusMaxVocab = uint32_t{1} << 24;
inline constexpr int TokenBytes(uint32_t vocab) { return vocab <= kCorpusMaxNarrowVocab ? 2 : 4; }

struct CorpusHeader {
  uint32_t version = 0;
  uint32_t vocab = 0;
  uint64_t tokens = 0;
  uint64_t documents = 0;
  uint64_t checksum = 0;
  uint64_t chunk_tokens = 0;  // version 2; 0 in version 1
  uint64_t chunks = 0;        // chunk checksums stored (0 in version 1)
  uint64_t header_bytes = 0;

  // Where the arrays start, and the size of the whole file.
  uint64_t DocStartsAt() const { return header_bytes; }
  uint64_t ChunkSumsAt() const { return header_bytes + 8 * documents; }
  uint64_t TokensAt() const { return ChunkSumsAt() + 8 * chunks; }
  uint64_t FileBytes() const { return TokensAt() + TokenBytes(vocab) * tokens; }
};

// The header of a version-2 file of these sizes; `checksum` is left 0.
CorpusHeader VersionTwoHeader(uint32_t vocab, uint64_t tokens, uint64_t documents,
                              uint64_t chunk_tokens);
// The header's bytes, as the file starts.
std::string HeaderBytes(const CorpusHeader& header);

// Parses the header of a file of `file_bytes` bytes whose first
// min(file_bytes, kCorpusHeaderBytesV2) bytes are at `head`, and checks that
// the file has the size the header implies. Returns "" and fills `*out`, or
// says what is wrong ("not a corpus file (bad magic)", "truncated: ...").
std::string ParseCorpusHeader(const char* head, uint64_t file_bytes, CorpusHeader* out);

}  // namespace trellis
