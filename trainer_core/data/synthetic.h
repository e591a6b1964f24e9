#pragma once
// A synthetic corpus for benchmarks at any vocabulary: `tokens` tokens from
// a first-order Markov source with a skewed (roughly Zipf, p(t) ~ 1 / (t + 1))
// unigram distribution. Each token has a few preferred successors, so a
// model's loss falls below the unigram entropy as it learns. Every token is a
// pure function of (seed, position), through the counter hash. `doc_tokens`
// = 0: one document; otherwise documents of that many tokens (the last may be
// shorter), where a row's attention and targets stop at each boundary as on
// packed real text. The tokens are the same either way. Torch-free.

#include <cstdint>

#include "trainer_core/data/corpus.h"

namespace trellis::train {

Corpus SyntheticCorpus(uint32_t vocab, int64_t tokens, uint64_t seed, int64_t doc_tokens = 0);

}  // namespace trellis::train
