#include "trainer_core/data/synthetic.h"

#include <cmath>
#include <string>

#include "trainer_core/error.h"
#include "trainer_core/model/init.h"

namespace trellis::train {
namespace {

constexpr int kSuccessors = 4;
constexpr double kFollowProbability = 0.75;

// Log-uniform over [1, vocab]: p(t) ~ 1 / (t + 1).
uint32_t Skewed(uint32_t vocab, double u) {
  const double t = std::floor(std::exp(u * std::log(static_cast<double>(vocab)))) - 1;
  return static_cast<uint32_t>(std::min<double>(vocab - 1, std::max(0.0, t)));
}

template <typename Id>
std::vector<Id> Draw(uint32_t vocab, int64_t tokens, uint64_t seed) {
  std::vector<Id> ids(static_cast<size_t>(tokens));
  const uint64_t draw = ParamSeed(seed, "synthetic.draw");
  const uint64_t successor = ParamSeed(seed, "synthetic.successor");
  ids[0] = static_cast<Id>(Skewed(vocab, CounterUniform(draw, 0)));
  for (int64_t i = 1; i < tokens; ++i) {
    const uint64_t h = CounterHash(draw, 2 * static_cast<uint64_t>(i));
    const double u = CounterUniform(draw, 2 * static_cast<uint64_t>(i) + 1);
    if (static_cast<double>(h >> 11) * 0x1.0p-53 < kFollowProbability) {
      // One of the previous token's fixed successors.
      const uint64_t which = ids[i - 1] * uint64_t{kSuccessors} + (h % kSuccessors);
      ids[i] = static_cast<Id>(Skewed(vocab, CounterUniform(successor, which)));
    } else {
      ids[i] = static_cast<Id>(Skewed(vocab, u));
    }
  }
  return ids;
}

}  // namespace

Corpus SyntheticCorpus(uint32_t vocab, int64_t tokens, uint64_t seed, int64_t doc_tokens) {
  if (vocab < 2 || vocab > kCorpusMaxVocab)
    throw TrainError("synthetic corpus: vocab must be in [2, " + std::to_string(kCorpusMaxVocab) +
                     "]");
  if (tokens < 2) throw TrainError("synthetic corpus: needs at least 2 tokens");
  if (doc_tokens < 0 || doc_tokens == 1)
    throw TrainError("synthetic corpus: doc_tokens must be 0 (one document) or at least 2, got " +
                     std::to_string(doc_tokens));
  std::vector<uint64_t> doc_starts;
  const int64_t per_doc = doc_tokens == 0 ? tokens : doc_tokens;
  for (int64_t start = 0; start < tokens; start += per_doc)
    doc_starts.push_back(static_cast<uint64_t>(start));
  if (TokenBytes(vocab) == 2)
    return OwnedCorpus(vocab, Draw<uint16_t>(vocab, tokens, seed), std::move(doc_starts));
  return OwnedWideCorpus(vocab, Draw<uint32_t>(vocab, tokens, seed), std::move(doc_starts));
}

}  // namespace trellis::train
