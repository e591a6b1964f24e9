#include "trainer_core/data/corpus_merge.h"

#include <algorithm>

#include "trainer_core/data/corpus.h"
#include "trainer_core/data/corpus_writer.h"
#include "trainer_core/error.h"

namespace trellis::train {

namespace {

constexpr uint64_t kPieceTokens = uint64_t{1} << 22;  // ids handed to the writer at a time

// The ids of `c` appended to `w`, as stored or widened from u16 to u32.
void AppendTokens(const Corpus& c, CorpusWriter& w) {
  const uint64_t n = c.tokens.size();
  const int width = w.token_bytes();
  if (c.tokens.width() == width) {
    const auto* bytes = static_cast<const char*>(c.tokens.data());
    for (uint64_t at = 0; at < n; at += kPieceTokens)
      w.Append(bytes + at * static_cast<uint64_t>(width), std::min(kPieceTokens, n - at));
    return;
  }
  std::vector<uint32_t> wide;
  for (uint64_t at = 0; at < n; at += kPieceTokens) {
    const uint64_t count = std::min(kPieceTokens, n - at);
    wide.resize(count);
    for (uint64_t i = 0; i < count; ++i) wide[i] = c.tokens[at + i];
    w.Append(wide.data(), count);
  }
}

}  // namespace

MergedCorpus MergeCorpora(const std::vector<std::string>& inputs, const std::string& out) {
  if (inputs.empty()) throw RefusedInput("merge: no input corpus given");
  MergedCorpus m;
  std::vector<Corpus> corpora;
  corpora.reserve(inputs.size());
  for (const std::string& path : inputs) {
    corpora.push_back(ReadCorpus(path));
    const Corpus& c = corpora.back();
    m.sources.push_back({path, c.tokens.size(), c.doc_starts.size(), c.vocab});
    m.vocab = std::max(m.vocab, c.vocab);
    m.tokens += c.tokens.size();
    m.documents += c.doc_starts.size();
  }
  std::vector<uint64_t> doc_starts;
  doc_starts.reserve(m.documents);
  uint64_t offset = 0;
  for (const Corpus& c : corpora) {
    for (uint64_t start : c.doc_starts) doc_starts.push_back(offset + start);
    offset += c.tokens.size();
  }
  CorpusWriter writer(out, m.vocab, m.tokens, std::move(doc_starts));
  for (const Corpus& c : corpora) AppendTokens(c, writer);
  m.checksum = writer.Finish();
  return m;
}

}  // namespace trellis::train
