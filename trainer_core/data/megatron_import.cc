#include "trainer_core/data/megatron_import.h"

#include <cstring>
#include <memory>
#include <vector>

#include "trainer_core/data/corpus_writer.h"
#include "trainer_core/error.h"
#include "trainer_core/files.h"

namespace trellis::train {
namespace {

constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kIndexHeaderBytes = 9 + 8 + 1 + 8 + 8;

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Bytes per id of a Megatron dtype code, 0 for the ones that are not
// integers (float64 = 6, float32 = 7) or unknown.
int CodeBytes(uint8_t code) {
  switch (code) {
    case 1: case 2: return 1;   // uint8, int8
    case 3: case 8: return 2;   // int16, uint16
    case 4: return 4;           // int32
    case 5: return 8;           // int64
    default: return 0;
  }
}

// Id i of a sequence stored with dtype `code`, as a signed value.
int64_t IdAt(const char* p, uint8_t code, uint64_t i) {
  switch (code) {
    case 1: return Load<uint8_t>(p + i);
    case 2: return Load<int8_t>(p + i);
    case 3: return Load<int16_t>(p + 2 * i);
    case 8: return Load<uint16_t>(p + 2 * i);
    case 4: return Load<int32_t>(p + 4 * i);
    default: return Load<int64_t>(p + 8 * i);
  }
}

struct Index {
  uint8_t code = 0;
  uint64_t sequences = 0, document_indices = 0;
  const char* lengths_at = nullptr;  // the arrays, read through Load (unaligned)
  const char* pointers_at = nullptr;
  const char* documents_at = nullptr;
};

Index ParseIndex(const MappedFile& file, const std::string& name) {
  auto fail = [&](const std::string& why) { throw RefusedInput(name + ": " + why); };
  const char* p = file.data();
  if (file.size() < kIndexHeaderBytes || std::memcmp(p, kIndexMagic, 9) != 0)
    fail("not a Megatron index (no MMIDIDX header)");
  if (Load<uint64_t>(p + 9) != 1)
    fail("index version " + std::to_string(Load<uint64_t>(p + 9)) + " (this build reads 1)");
  Index x;
  x.code = Load<uint8_t>(p + 17);
  if (CodeBytes(x.code) == 0)
    fail("dtype code " + std::to_string(x.code) +
         ": token ids must be integers (codes 1-5 and 8: uint8, int8, int16, int32, int64, "
         "uint16)");
  x.sequences = Load<uint64_t>(p + 18);
  x.document_indices = Load<uint64_t>(p + 26);
  const uint64_t need = kIndexHeaderBytes + 12 * x.sequences + 8 * x.document_indices;
  // A multimodal index adds one mode byte per sequence.
  if (x.sequences > (uint64_t{1} << 40) || x.document_indices > x.sequences + 1 ||
      (file.size() != need && file.size() != need + x.sequences))
    fail(std::to_string(file.size()) + " bytes for " + std::to_string(x.sequences) +
         " sequences and " + std::to_string(x.document_indices) + " document indices (" +
         std::to_string(need) + " expected)");
  x.lengths_at = p + kIndexHeaderBytes;
  x.pointers_at = x.lengths_at + 4 * x.sequences;
  x.documents_at = x.pointers_at + 8 * x.sequences;
  return x;
}

}  // namespace

MegatronImport ImportMegatron(const std::string& prefix, uint32_t vocab, const std::string& out) {
  if (vocab < 2 || vocab > kCorpusMaxVocab)
    throw RefusedInput("vocab " + std::to_string(vocab) + " out of range (2 to " +
                       std::to_string(kCorpusMaxVocab) + ")");
  const std::string idx_name = prefix + ".idx", bin_name = prefix + ".bin";
  const auto idx = MapFileUnderRoots(idx_name, {}, "Megatron index");
  const auto bin = MapFileUnderRoots(bin_name, {}, "Megatron data");
  const Index x = ParseIndex(*idx, idx_name);
  auto fail = [&](const std::string& why) { throw RefusedInput(idx_name + ": " + why); };
  const uint64_t width = static_cast<uint64_t>(CodeBytes(x.code));

  // Sequence s holds lengths[s] ids at byte offset pointers[s] of the .bin.
  MegatronImport r;
  r.sequences = x.sequences;
  std::vector<uint64_t> first_token(x.sequences + 1, 0);
  for (uint64_t s = 0; s < x.sequences; ++s) {
    const int32_t length = Load<int32_t>(x.lengths_at + 4 * s);
    const int64_t at = Load<int64_t>(x.pointers_at + 8 * s);
    if (length < 0 || at < 0 || static_cast<uint64_t>(at) % width != 0 ||
        static_cast<uint64_t>(at) + width * static_cast<uint64_t>(length) > bin->size())
      fail("sequence " + std::to_string(s) + " (" + std::to_string(length) + " ids at byte " +
           std::to_string(at) + ") does not lie in " + bin_name + " (" +
           std::to_string(bin->size()) + " bytes)");
    first_token[s + 1] = first_token[s] + static_cast<uint64_t>(length);
  }
  r.tokens = first_token[x.sequences];
  if (r.tokens < 2) fail("fewer than 2 tokens");

  // Documents: sequences [indices[d], indices[d + 1]); empty ones are dropped.
  std::vector<uint64_t> doc_starts;
  for (uint64_t d = 0; d + 1 < x.document_indices; ++d) {
    const int64_t begin = Load<int64_t>(x.documents_at + 8 * d);
    const int64_t end = Load<int64_t>(x.documents_at + 8 * (d + 1));
    if (begin < 0 || end < begin || static_cast<uint64_t>(end) > x.sequences)
      fail("document " + std::to_string(d) + " spans sequences " + std::to_string(begin) +
           " to " + std::to_string(end) + " of " + std::to_string(x.sequences));
    if (d == 0 && begin != 0) fail("the first document must start at sequence 0");
    ++r.documents;
    if (first_token[static_cast<uint64_t>(end)] == first_token[static_cast<uint64_t>(begin)]) {
      ++r.empty_documents;
      continue;
    }
    doc_starts.push_back(first_token[static_cast<uint64_t>(begin)]);
  }
  if (x.document_indices < 2 ||
      Load<int64_t>(x.documents_at + 8 * (x.document_indices - 1)) !=
          static_cast<int64_t>(x.sequences))
    fail("its documents do not end at the last sequence (" + std::to_string(x.sequences) + ")");

  CorpusWriter writer(out, vocab, r.tokens, std::move(doc_starts));
  const int out_width = writer.token_bytes();
  std::vector<char> buffer;
  for (uint64_t s = 0; s < x.sequences; ++s) {
    const uint64_t length = first_token[s + 1] - first_token[s];
    const char* ids = bin->data() + Load<int64_t>(x.pointers_at + 8 * s);
    buffer.resize(length * static_cast<uint64_t>(out_width));
    for (uint64_t i = 0; i < length; ++i) {
      const int64_t id = IdAt(ids, x.code, i);
      if (id < 0 || id >= static_cast<int64_t>(vocab))
        throw RefusedInput(bin_name + ": sequence " + std::to_string(s) + ", id " +
                           std::to_string(i) + " is " + std::to_string(id) +
                           ", not in [0, vocab " + std::to_string(vocab) + ")");
      if (out_width == 2) {
        const auto narrow = static_cast<uint16_t>(id);
        std::memcpy(buffer.data() + 2 * i, &narrow, 2);
      } else {
        const auto wide = static_cast<uint32_t>(id);
        std::memcpy(buffer.data() + 4 * i, &wide, 4);
      }
    }
    writer.Append(buffer.data(), length);
  }
  r.checksum = writer.Finish();
  return r;
}

}  // namespace trellis::train
