#pragma once
// Writes a corpus file (version 2, corpus.h) from token ids given in pieces,
// so that a corpus larger than memory can be written: the boundaries and
// the token count are known first, the ids come in order, the chunk
// checksums are taken as they pass and written at the end, with the header.
// The file appears at `path` only when Finish succeeds, whole and durable
// (written to `path`.tmp, fsynced and renamed: common/atomic_file_writer.h).
// Torch-free.

#include <cstdint>
#include <string>
#include <vector>

#include "common/atomic_file_writer.h"
#include "common/corpus_header.h"
#include "trainer_core/checkpoint/xxhash64.h"

namespace trellis::train {

class CorpusWriter {
 public:
  // `doc_starts`: the first token of each document, as the reader wants them.
  // Throws TrainError naming the file; a writer destroyed before Finish
  // removes its temporary file.
  CorpusWriter(const std::string& path, uint32_t vocab, uint64_t tokens,
               std::vector<uint64_t> doc_starts);
  CorpusWriter(const CorpusWriter&) = delete;
  CorpusWriter& operator=(const CorpusWriter&) = delete;

  int token_bytes() const { return TokenBytes(header_.vocab); }
  // `count` ids of token_bytes() each (u16 or u32), in order; not checked
  // against the vocab (the caller's part).
  void Append(const void* ids, uint64_t count);
  // All `tokens` ids given: writes the chunk checksums and the header, and
  // renames the file into place. Returns its checksum.
  uint64_t Finish();

 private:
  // Throws unless `written` (what the file said it did).
  void Check(bool written) const;

  std::string path_;
  CorpusHeader header_;
  std::vector<uint64_t> doc_starts_;
  std::vector<uint64_t> chunk_sums_;
  Xxh64 chunk_;
  uint64_t in_chunk_ = 0, written_ = 0;
  AtomicFileWriter file_;
};

}  // namespace trellis::train
