#pragma once
// The pre-tokenized corpus: token ids plus document boundaries, one file.
// Layout (little-endian), documented in trainer_core/README.md. Version 2,
// which this build writes:
//   0   char[8]  magic "TRLSCORP"
//   8   u32      version (2)
//   12  u32      vocab size (token ids are < vocab; at most 2^24)
//   16  u64      number of tokens N
//   24  u64      number of documents D
//   32  u64      checksum: XXH64 of the boundaries and chunk checksums (the
//                two arrays below them, as stored), the corpus's identity
//   40  u64      tokens per chunk K (>= 1)
//   48  u64[D]   first token of each document (0, strictly increasing, < N)
//   ..  u64[C]   XXH64 of each chunk of K tokens' bytes, C = ceil(N / K)
//   ..  u16[N]   token ids; u32[N] where the vocab is over 65536
// Version 1 (still read): a 40-byte header without K, a vocab of at most
// 65536, its checksum FNV-1a 64 of the boundaries and tokens, then u64[D]
// and u16[N].
// Torch-free.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/corpus_header.h"  // kCorpusMagic, kCorpusVersion, the header

namespace trellis::train {

inline constexpr int kByteVocab = 256;

// A read-only view of `size` values at `data`, owned elsewhere.
template <typename T>
class ConstSpan {
 public:
  ConstSpan() = default;
  ConstSpan(const T* data, size_t size) : data_(data), size_(size) {}
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T& operator[](size_t i) const { return data_[i]; }
  const T& back() const { return data_[size_ - 1]; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  std::vector<T> ToVector() const { return std::vector<T>(begin(), end()); }

 private:
  const T* data_ = nullptr;
  size_t size_ = 0;
};

// Token ids as stored: u16 where the vocab allows (at most 65536 ids), else
// u32 (common/corpus_header.h, TokenBytes), read as u32 either way.
class TokenSpan {
 public:
  TokenSpan() = default;
  TokenSpan(const void* data, size_t size, int width) : data_(data), size_(size), width_(width) {}
  uint32_t operator[](size_t i) const {
    return width_ == 2 ? static_cast<const uint16_t*>(data_)[i]
                       : static_cast<const uint32_t*>(data_)[i];
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int width() const { return width_; }  // bytes per id: 2 or 4
  const void* data() const { return data_; }
  size_t bytes() const { return size_ * static_cast<size_t>(width_); }
  std::vector<uint32_t> ToVector() const;

 private:
  const void* data_ = nullptr;
  size_t size_ = 0;
  int width_ = 2;
};

// A corpus in memory. Read from a file (ReadCorpus), the tokens and
// boundaries are the file's mapped pages: the ranks of a node share one copy
// in the page cache, which the kernel may drop and read again, so the gate
// need not count it (docs/architecture.md). Built in memory (OwnedCorpus),
// they live in vectors. Copies share the same `backing`.
struct Corpus {
  uint32_t vocab = 0;
  TokenSpan tokens;  // of width TokenBytes(vocab)
  ConstSpan<uint64_t> doc_starts;
  uint64_t checksum = 0;  // as stored; identifies the data in checkpoints
  uint32_t version = kCorpusVersion;  // of the file it was read from
  std::shared_ptr<const void> backing;  // what the spans point into
};

// A corpus of these vectors, its checksum computed; nothing is checked but
// that the ids fit their width: u16 ids for a vocab of at most 65536,
// u32 ids (OwnedWideCorpus) for a larger one (TrainError otherwise).
Corpus OwnedCorpus(uint32_t vocab, std::vector<uint16_t> tokens, std::vector<uint64_t> doc_starts);
Corpus OwnedWideCorpus(uint32_t vocab, std::vector<uint32_t> tokens,
                       std::vector<uint64_t> doc_starts);

// FNV-1a 64, continued from `h` (so it can run over several buffers).
uint64_t Fnv1a(const void* data, size_t n, uint64_t h = 0xCBF29CE484222325ull);

// The checksum version 1 gives these tokens and boundaries (FNV-1a 64 of
// both, one byte after another: about 1 GB/s). Only u16 ids were written in
// version 1, so a corpus of wider ids has none (nullopt). Lets a checkpoint
// made on a version-1 file resume on its `trellis-corpus upgrade` copy.
std::optional<uint64_t> VersionOneChecksum(const Corpus& corpus);

// Maps the file (files.h, MappedFile: it must not shrink while in use) and
// checks all of it in one pass. Throws TrainError naming the file and what is
// wrong (truncated, bad magic, unsupported version, checksum mismatch, token
// out of range, bad boundaries). `data_roots` given: the file must lie under
// one of them, checked on the file as opened (RefusedInput otherwise).
Corpus ReadCorpus(const std::string& path, const std::vector<std::string>& data_roots = {});
// Writes to `path`.tmp then renames, so a reader never sees half a file.
void WriteCorpus(const std::string& path, const Corpus& corpus);

// Byte-level tokenizer: each byte is one token (vocab 256), so any text
// round-trips and no vocabulary file is needed.
std::vector<uint16_t> ByteTokenize(const std::string& text);

struct BuildStats {
  int64_t files_used = 0, files_skipped = 0;
};
// One document per text file; directories are walked recursively in sorted
// order (the corpus is reproducible). Files that look binary (a NUL byte in
// the first 4 KiB) or compressed (.gz, .xz, .bz2) are skipped; so are empty ones.
// Symbolic links inside directories are not followed: no loops, and a text
// linked under two names (GPL -> GPL-3) enters the corpus once.
Corpus BuildByteCorpus(const std::vector<std::string>& inputs, BuildStats* stats);

}  // namespace trellis::train
