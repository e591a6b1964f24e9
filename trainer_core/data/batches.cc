#include "trainer_core/data/batches.h"

#include <algorithm>

#include "trainer_core/error.h"
#include "trainer_core/model/init.h"

namespace trellis::train {

BatchSource::BatchSource(const Corpus* corpus, int64_t seq_len, int64_t global_batch, uint64_t seed,
                         RowOrder order)
    : corpus_(corpus),
      seq_len_(seq_len),
      global_batch_(global_batch),
      num_rows_((static_cast<int64_t>(corpus->tokens.size()) - 1) / seq_len),
      seed_(ParamSeed(seed, "data.order")),
      row_order_(order) {
  if (num_rows_ < 1)
    throw RefusedInput(
        "corpus has " + std::to_string(corpus->tokens.size()) +
        " tokens, fewer than one row of training.seq_len + 1 = " + std::to_string(seq_len + 1));
  if (row_order_ == RowOrder::kCostBands) costs_ = RowAttentionCosts(*corpus, seq_len, num_rows_);
}

int64_t BatchSource::RowAt(int64_t k) {
  const int64_t epoch = k / num_rows_;
  if (epoch != epoch_) {
    const uint64_t epoch_seed = CounterHash(seed_, static_cast<uint64_t>(epoch));
    // Steps run on across epochs: the rows of this epoch that finish the
    // previous epoch's last step come before its first whole step.
    const int64_t lead = (global_batch_ - epoch * num_rows_ % global_batch_) % global_batch_;
    order_ = row_order_ == RowOrder::kCostBands
                 ? CostBandedOrder(costs_, global_batch_, epoch_seed, lead)
                 : ShuffledOrder(num_rows_, epoch_seed);
    epoch_ = epoch;
  }
  return order_[k % num_rows_];
}

HostBatch BatchSource::ForStep(int64_t step) {
  HostBatch b;
  b.rows = global_batch_;
  b.seq_len = seq_len_;
  const auto& starts = corpus_->doc_starts;
  const auto& tokens = corpus_->tokens;
  for (int64_t r = 0; r < global_batch_; ++r) {
    const auto first = static_cast<uint64_t>(RowAt(RowsBefore(step) + r) * seq_len_);
    // Document of the row's first token, then advanced as boundaries pass.
    auto doc = static_cast<int64_t>(std::upper_bound(starts.begin(), starts.end(), first) -
                                    starts.begin()) -
               1;
    auto doc_of = [&](uint64_t pos) {
      while (doc + 1 < static_cast<int64_t>(starts.size()) && starts[doc + 1] <= pos) ++doc;
      return doc;
    };
    for (int64_t i = 0; i < seq_len_; ++i) {
      const uint64_t pos = first + i;
      const int64_t here = doc_of(pos);
      b.inputs.push_back(tokens[pos]);
      b.doc_ids.push_back(here);
      // The first token of the next document cannot be predicted from this one.
      b.targets.push_back(doc_of(pos + 1) == here ? int64_t{tokens[pos + 1]} : -1);
      doc = here;
    }
  }
  return b;
}

}  // namespace trellis::train
