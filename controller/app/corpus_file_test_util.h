#pragma once
// A file that passes the controller's check of a [model] run's corpus: a
// corpus header and the size it implies, zeros after it (the controller reads
// the header only; the ranks check the rest).

#include <filesystem>
#include <fstream>
#include <string>

#include "common/corpus_header.h"

namespace trellis::controller::test_files {

inline void WriteCorpusShapedFile(const std::filesystem::path& path, uint32_t vocab = 256,
                                  uint64_t tokens = 4096) {
  const CorpusHeader h = VersionTwoHeader(vocab, tokens, /*documents=*/1, /*chunk_tokens=*/1024);
  std::ofstream(path, std::ios::binary)
      << HeaderBytes(h) << std::string(h.FileBytes() - h.header_bytes, '\0');
}

}  // namespace trellis::controller::test_files
