#pragma once
// What model_test's files share: a fresh seed, a tiny spec and a batch.

#include <cstdint>
#include <cstdlib>
#include <random>

#include "trainer_core/model/model.h"

namespace trellis::train::testing {

// Fresh per run; TRELLIS_TEST_SEED replays the seed a failure's trace printed.
inline uint64_t FreshSeed() {
  if (const char* s = std::getenv("TRELLIS_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  static std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

inline spec::ModelSpec TinySpec() {
  spec::ModelSpec m;
  m.layers = 2;
  m.hidden = 16;
  m.heads = 4;
  m.kv_heads = 2;
  m.experts = 4;
  m.experts_per_token = 2;
  m.expert_hidden = 8;
  m.vocab = 32;
  m.shared_expert = true;
  m.init_std = 0.3;  // large enough that every path carries signal in fp64
  return m;
}

// Two rows of 8 tokens; row 0 packs two documents (positions 0-2 and 3-7).
inline TokenBatch RandomBatch(uint64_t seed, int64_t vocab) {
  torch::manual_seed(seed);
  TokenBatch b;
  b.inputs = torch::randint(vocab, {2, 8}, torch::kLong);
  b.targets = torch::randint(vocab, {2, 8}, torch::kLong);
  b.targets[0][2] = -1;  // the last token of a document predicts nothing
  b.doc_ids = torch::tensor({0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2}).view({2, 8});
  return b;
}

}  // namespace trellis::train::testing
