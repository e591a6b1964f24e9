#pragma once
// Fixed-length rows over the corpus and the batches of each step.
// Row r holds tokens [r T, r T + T] (T + 1 tokens: inputs and shifted
// targets), so documents are split across rows and rows pack several
// documents. Each epoch visits every row once in an order shuffled by a
// counter-based generator keyed by (seed, epoch), or in cost bands
// (row_order.h): either way the batch of a step is a pure function of (seed,
// row order, step), which makes the data position one number.
// Torch-free.

#include <cstdint>
#include <vector>

#include "trainer_core/data/corpus.h"
#include "trainer_core/data/row_order.h"

namespace trellis::train {

struct HostBatch {
  int64_t rows = 0, seq_len = 0;
  std::vector<int64_t> inputs;   // [rows, seq_len]
  std::vector<int64_t> targets;  // -1 where the next token starts another document
  std::vector<int64_t> doc_ids;  // corpus document index of each input token
};

class BatchSource {
 public:
  // Throws TrainError when the corpus holds less than one row.
  BatchSource(const Corpus* corpus, int64_t seq_len, int64_t global_batch, uint64_t seed,
              RowOrder order = RowOrder::kShuffled);

  int64_t num_rows() const { return num_rows_; }
  // Rows consumed before `step` (0-based): the data position a checkpoint keeps.
  int64_t RowsBefore(int64_t step) const { return step * global_batch_; }
  // Corpus row at position k of the shuffled stream (k counts across epochs).
  int64_t RowAt(int64_t k);
  HostBatch ForStep(int64_t step);

 private:
  const Corpus* corpus_;
  int64_t seq_len_, global_batch_, num_rows_;
  uint64_t seed_;
  RowOrder row_order_;
  std::vector<uint64_t> costs_;  // per row, for RowOrder::kCostBands
  int64_t epoch_ = -1;
  std::vector<int64_t> order_;  // permutation of the current epoch
};

}  // namespace trellis::train
