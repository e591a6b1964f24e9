#include "common/corpus_header.h"

#include <cstring>

namespace trellis {
namespace {

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void Append(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

}  // namespace

CorpusHeader VersionTwoHeader(uint32_t vocab, uint64_t tokens, uint64_t documents,
                              uint64_t chunk_tokens) {
  CorpusHeader h;
  h.version = 2;
  h.vocab = vocab;
  h.tokens = tokens;
  h.documents = documents;
  h.chunk_tokens = chunk_tokens;
  h.chunks = (tokens + chunk_tokens - 1) / chunk_tokens;
  h.header_bytes = kCorpusHeaderBytesV2;
  return h;
}

std::string HeaderBytes(const CorpusHeader& h) {
  std::string out(kCorpusMagic, 8);
  Append<uint32_t>(&out, h.version);
  Append<uint32_t>(&out, h.vocab);
  Append<uint64_t>(&out, h.tokens);
  Append<uint64_t>(&out, h.documents);
  Append<uint64_t>(&out, h.checksum);
  if (h.version >= 2) Append<uint64_t>(&out, h.chunk_tokens);
  return out;
}

std::string ParseCorpusHeader(const char* head, uint64_t file_bytes, CorpusHeader* out) {
  const std::string shorter =
      "truncated: " + std::to_string(file_bytes) + " bytes, shorter than the header";
  if (file_bytes < kCorpusHeaderBytesV1) return shorter;
  if (std::memcmp(head, kCorpusMagic, 8) != 0) return "not a corpus file (bad magic)";
  CorpusHeader h;
  h.version = Load<uint32_t>(head + 8);
  if (h.version != 1 && h.version != 2)
    return "unsupported version " + std::to_string(h.version) + " (this build reads 1 and 2)";
  h.header_bytes = h.version == 1 ? kCorpusHeaderBytesV1 : kCorpusHeaderBytesV2;
  if (file_bytes < h.header_bytes) return shorter;
  h.vocab = Load<uint32_t>(head + 12);
  h.tokens = Load<uint64_t>(head + 16);
  h.documents = Load<uint64_t>(head + 24);
  h.checksum = Load<uint64_t>(head + 32);
  const uint32_t max_vocab = h.version == 1 ? kCorpusMaxNarrowVocab : kCorpusMaxVocab;
  if (h.vocab < 2 || h.vocab > max_vocab)
    return "vocab " + std::to_string(h.vocab) + " out of range (version " +
           std::to_string(h.version) + " takes 2 to " + std::to_string(max_vocab) + ")";
  if (h.tokens > (uint64_t{1} << 40) || h.documents > h.tokens)
    return "header claims " + std::to_string(h.tokens) + " tokens and " +
           std::to_string(h.documents) + " documents";
  if (h.version == 2) {
    h.chunk_tokens = Load<uint64_t>(head + 40);
    if (h.chunk_tokens == 0 || h.chunk_tokens > (uint64_t{1} << 40))
      return "header claims " + std::to_string(h.chunk_tokens) +
             " tokens per chunk (accepted: 1 to 2^40)";
    h.chunks = (h.tokens + h.chunk_tokens - 1) / h.chunk_tokens;
  }
  // At most 2^40 tokens, documents and chunks each: no overflow.
  if (file_bytes != h.FileBytes())
    return (file_bytes < h.FileBytes() ? "truncated: " : "trailing bytes: ") +
           std::to_string(file_bytes) + " bytes, the header implies " +
           std::to_string(h.FileBytes());
  *out = h;
  return "";
}

}  // namespace trellis
