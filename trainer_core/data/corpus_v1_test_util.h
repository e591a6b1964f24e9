#pragma once
// A version-1 corpus file laid out by hand (this build writes only version 2):
// for the tests that read one, upgrade one, or resume a checkpoint made on one.

#include <cstdint>
#include <string>
#include <vector>

#include "trainer_core/data/corpus.h"

namespace trellis::train::testing {

// 40-byte header, FNV-1a 64 of the boundaries and tokens, no chunk
// checksums, u16 ids.
inline std::string V1File(uint32_t vocab, const std::vector<uint32_t>& ids,
                          const std::vector<uint64_t>& starts) {
  const std::vector<uint16_t> tokens(ids.begin(), ids.end());
  std::string out(kCorpusMagic, 8);
  auto put = [&out](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  const uint32_t version = 1;
  const uint64_t n = tokens.size(), d = starts.size();
  const uint64_t sum = Fnv1a(tokens.data(), 2 * n, Fnv1a(starts.data(), 8 * d));
  put(&version, 4);
  put(&vocab, 4);
  put(&n, 8);
  put(&d, 8);
  put(&sum, 8);
  put(starts.data(), 8 * d);
  put(tokens.data(), 2 * n);
  return out;
}

// The same corpus as a version-1 file.
inline std::string V1File(const Corpus& c) {
  return V1File(c.vocab, c.tokens.ToVector(), c.doc_starts.ToVector());
}

}  // namespace trellis::train::testing
