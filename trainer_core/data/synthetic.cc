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
uint16_t Skewed(uint32_t vocab, double u) {
  const double t = std::floor(std::exp(u * std::log(static_cast<double>(vocab)))) - 1;
  return static_cast<uint16_t>(std::min<double>(vocab - 1, std::max(0.0, t)));
}

}  // namespace

Corpus SyntheticCorpus(uint32_t vocab, int64_t tokens, uint64_t seed, int64_t doc_tokens) {
  if (vocab < 2 || vocab > 65536) throw TrainError("synthetic corpus: vocab must be in [2, 65536]");
  if (tokens < 2) throw TrainError("synthetic corpus: needs at least 2 tokens");
  if (doc_tokens < 0 || doc_tokens == 1)
    throw TrainError("synthetic corpus: doc_tokens must be 0 (one document) or at least 2, got " +
                     std::to_string(doc_tokens));
  std::vector<uint64_t> doc_starts;
  const int64_t per_doc = doc_tokens == 0 ? tokens : doc_tokens;
  for (int64_t start = 0; start < tokens; start += per_doc)
    doc_starts.push_back(static_cast<uint64_t>(start));
  std::vector<uint16_t> ids(static_cast<size_t>(tokens));
  const uint64_t draw = ParamSeed(seed, "synthetic.draw");
  const uint64_t successor = ParamSeed(seed, "synthetic.successor");
  ids[0] = Skewed(vocab, CounterUniform(draw, 0));
  for (int64_t i = 1; i < tokens; ++i) {
    const uint64_t h = CounterHash(draw, 2 * static_cast<uint64_t>(i));
    const double u = CounterUniform(draw, 2 * static_cast<uint64_t>(i) + 1);
    if (static_cast<double>(h >> 11) * 0x1.0p-53 < kFollowProbability) {
      // One of the previous token's fixed successors.
      const uint64_t which = ids[i - 1] * uint64_t{kSuccessors} + (h % kSuccessors);
      ids[i] = Skewed(vocab, CounterUniform(successor, which));
    } else {
      ids[i] = Skewed(vocab, u);
    }
  }
  return OwnedCorpus(vocab, std::move(ids), std::move(doc_starts));
}

}  // namespace trellis::train
