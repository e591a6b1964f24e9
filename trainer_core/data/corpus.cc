#include "trainer_core/data/corpus.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "trainer_core/data/corpus_chunks.h"
#include "trainer_core/data/corpus_writer.h"
#include "trainer_core/error.h"
#include "trainer_core/files.h"

namespace trellis::train {
namespace {

constexpr uint64_t kFnvPrime = 0x100000001B3ull;

std::string ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TrainError(std::string(what) + " " + path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A version-1 corpus's checksum, and the largest id in `*max_token`, in one
// pass over the ids (u16 in version 1).
uint64_t V1ChecksumAndLargestToken(const Corpus& c, uint32_t* max_token) {
  uint64_t h = Fnv1a(c.doc_starts.data(), c.doc_starts.size() * sizeof(uint64_t));
  const auto* ids = static_cast<const uint16_t*>(c.tokens.data());
  const auto* bytes = static_cast<const unsigned char*>(c.tokens.data());
  uint16_t largest = 0;
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    h = (h ^ bytes[2 * i]) * kFnvPrime;
    h = (h ^ bytes[2 * i + 1]) * kFnvPrime;
    largest = std::max(largest, ids[i]);
  }
  if (max_token != nullptr) *max_token = largest;
  return h;
}

bool LooksLikeText(const std::string& path, const std::string& head) {
  for (const char* ext : {".gz", ".xz", ".bz2", ".zst"})
    if (path.size() > std::strlen(ext) &&
        path.compare(path.size() - std::strlen(ext), std::string::npos, ext) == 0)
      return false;
  return head.find('\0') == std::string::npos;
}

}  // namespace

uint64_t Fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

std::optional<uint64_t> VersionOneChecksum(const Corpus& corpus) {
  if (corpus.tokens.width() != 2) return std::nullopt;
  return V1ChecksumAndLargestToken(corpus, nullptr);
}

std::vector<uint32_t> TokenSpan::ToVector() const {
  std::vector<uint32_t> ids(size_);
  for (size_t i = 0; i < size_; ++i) ids[i] = (*this)[i];
  return ids;
}

namespace {

// A corpus that owns its vectors of ids (u16 or u32) and boundaries.
template <typename Id>
Corpus Owned(uint32_t vocab, std::vector<Id> tokens, std::vector<uint64_t> doc_starts) {
  if (static_cast<int>(sizeof(Id)) != TokenBytes(vocab))
    throw TrainError("corpus: a vocab of " + std::to_string(vocab) + " takes ids of " +
                     std::to_string(TokenBytes(vocab)) + " bytes, not " +
                     std::to_string(sizeof(Id)));
  struct Vectors {
    std::vector<Id> tokens;
    std::vector<uint64_t> doc_starts;
  };
  auto owned = std::make_shared<Vectors>(Vectors{std::move(tokens), std::move(doc_starts)});
  Corpus c;
  c.vocab = vocab;
  c.tokens = TokenSpan(owned->tokens.data(), owned->tokens.size(), sizeof(Id));
  c.doc_starts = ConstSpan<uint64_t>(owned->doc_starts.data(), owned->doc_starts.size());
  c.backing = std::move(owned);
  const std::vector<uint64_t> sums =
      ChunkChecksums(c.tokens.data(), c.tokens.width(), c.tokens.size(), kCorpusChunkTokens);
  c.checksum = CorpusIdentity(c.doc_starts.data(), c.doc_starts.size(), sums.data(), sums.size());
  return c;
}

}  // namespace

Corpus OwnedCorpus(uint32_t vocab, std::vector<uint16_t> tokens, std::vector<uint64_t> doc_starts) {
  return Owned(vocab, std::move(tokens), std::move(doc_starts));
}

Corpus OwnedWideCorpus(uint32_t vocab, std::vector<uint32_t> tokens,
                       std::vector<uint64_t> doc_starts) {
  return Owned(vocab, std::move(tokens), std::move(doc_starts));
}

Corpus ReadCorpus(const std::string& path, const std::vector<std::string>& data_roots) {
  const std::shared_ptr<const MappedFile> file =
      MapFileUnderRoots(path, data_roots, data_roots.empty() ? "corpus" : "training.data: corpus");
  // The file was read: what is wrong with it is wrong on every node.
  auto fail = [&](const std::string& why) { throw RefusedInput("corpus " + path + ": " + why); };
  CorpusHeader h;
  if (std::string why = ParseCorpusHeader(file->data(), file->size(), &h); !why.empty()) fail(why);
  Corpus c;
  c.version = h.version;
  c.vocab = h.vocab;
  c.checksum = h.checksum;
  const uint64_t n = h.tokens, d = h.documents, chunks = h.chunks, chunk_tokens = h.chunk_tokens;
  // The arrays start at a multiple of 8 bytes in a page-aligned mapping: each
  // is aligned for its type.
  const char* p = file->data();
  const auto* chunk_sums = reinterpret_cast<const uint64_t*>(p + h.ChunkSumsAt());
  c.doc_starts = ConstSpan<uint64_t>(reinterpret_cast<const uint64_t*>(p + h.DocStartsAt()), d);
  c.tokens = TokenSpan(p + h.TokensAt(), n, TokenBytes(h.vocab));
  c.backing = file;
  file->ReadInOrder(true);
  uint32_t max_token = 0;
  if (h.version == 1) {
    if (V1ChecksumAndLargestToken(c, &max_token) != c.checksum)
      fail("checksum mismatch: the file is corrupt");
  } else {
    if (CorpusIdentity(c.doc_starts.data(), d, chunk_sums, chunks) != c.checksum)
      fail("checksum mismatch in the document boundaries or chunk checksums: the file is corrupt");
    const ChunkCheck check =
        CheckChunks(c.tokens.data(), c.tokens.width(), n, chunk_tokens, chunk_sums,
                    CorpusCheckThreads());
    if (check.first_bad_chunk < chunks)
      fail("checksum mismatch in tokens " + std::to_string(check.first_bad_chunk * chunk_tokens) +
           " to " + std::to_string(std::min(n, (check.first_bad_chunk + 1) * chunk_tokens) - 1) +
           " (chunk " + std::to_string(check.first_bad_chunk) + " of " + std::to_string(chunks) +
           "): the file is corrupt");
    max_token = check.largest_token;
  }
  file->ReadInOrder(false);  // training reads rows here and there
  if (n == 0 || d == 0) fail("empty corpus");
  if (c.doc_starts[0] != 0) fail("the first document must start at token 0");
  for (uint64_t i = 1; i < d; ++i)
    if (c.doc_starts[i] <= c.doc_starts[i - 1] || c.doc_starts[i] >= n)
      fail("document " + std::to_string(i) + " starts at " + std::to_string(c.doc_starts[i]) +
           ": boundaries must increase and lie below " + std::to_string(n));
  if (max_token >= c.vocab)
    for (uint64_t i = 0; i < n; ++i)
      if (c.tokens[i] >= c.vocab)
        fail("token " + std::to_string(i) + " is " + std::to_string(c.tokens[i]) +
             ", not below the vocab size " + std::to_string(c.vocab));
  return c;
}

void WriteCorpus(const std::string& path, const Corpus& corpus) {
  CorpusWriter writer(path, corpus.vocab, corpus.tokens.size(), corpus.doc_starts.ToVector());
  writer.Append(corpus.tokens.data(), corpus.tokens.size());
  writer.Finish();
}

std::vector<uint16_t> ByteTokenize(const std::string& text) {
  return std::vector<uint16_t>(reinterpret_cast<const unsigned char*>(text.data()),
                               reinterpret_cast<const unsigned char*>(text.data()) + text.size());
}

Corpus BuildByteCorpus(const std::vector<std::string>& inputs, BuildStats* stats) {
  std::vector<std::string> files;
  for (const auto& in : inputs) {
    if (IsDirectory(in)) {
      auto found = ListFilesRecursive(in);
      files.insert(files.end(), found.begin(), found.end());
    } else if (IsRegularFile(in)) {
      files.push_back(in);
    } else {
      throw TrainError("input " + in + ": not a file or directory");
    }
  }
  std::vector<uint16_t> tokens;
  std::vector<uint64_t> doc_starts;
  for (const auto& f : files) {
    std::string text = ReadFile(f, "input");
    if (text.empty() || !LooksLikeText(f, text.substr(0, 4096))) {
      ++stats->files_skipped;
      continue;
    }
    ++stats->files_used;
    doc_starts.push_back(tokens.size());
    auto ids = ByteTokenize(text);
    tokens.insert(tokens.end(), ids.begin(), ids.end());
  }
  if (tokens.empty()) throw TrainError("no text found in the inputs");
  return OwnedCorpus(kByteVocab, std::move(tokens), std::move(doc_starts));
}

}  // namespace trellis::train
