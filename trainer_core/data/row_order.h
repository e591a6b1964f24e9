#pragma once
// The order in which an epoch visits the corpus rows (training.row_order).
//
// With document masking, a row's attention work is the sum over the documents
// in it of (tokens of that document in the row)^2: a row holding one 8,192-token
// document costs 64x a row of 64 documents of 128. Shuffled rows give each
// rank of a step a different cost, and every collective waits for the most
// expensive rank. "cost_bands" puts the rows into narrow cost bands (costs
// within a factor 1 + kBandWidth of each other), shuffles the rows within each
// band, lays the bands out cheapest first, takes consecutive rows as steps (so
// the rows of a step, hence its ranks, cost about the same: one band, or two
// neighbours where a step straddles them) and shuffles the order of the
// steps. Rows of one document (all costing seq_len^2, most rows of a corpus of
// long documents) share a band and are shuffled among themselves. Every row is
// still visited once per epoch, in an order that is a pure function of (seed,
// epoch).
// Pure and torch-free: tested and benchmarked on the CPU.

#include <cstdint>
#include <string>
#include <vector>

#include "trainer_core/data/corpus.h"

namespace trellis::train {

enum class RowOrder { kShuffled, kCostBands };

// "shuffled" or "cost_bands"; anything else throws TrainError naming both.
RowOrder ParseRowOrder(const std::string& name);

// A band holds costs in [(1 + kBandWidth)^i, (1 + kBandWidth)^(i + 1)):
// narrow enough that a step's ranks wait little on each other, wide enough
// that rows of nearly the same cost are shuffled among many steps.
inline constexpr double kBandWidth = 0.05;
// The band of a row of cost `cost` (> 0).
int64_t CostBand(uint64_t cost);

// The rows of one epoch shuffled (Fisher-Yates driven by the counter hash of
// (epoch_seed, i)).
std::vector<int64_t> ShuffledOrder(int64_t num_rows, uint64_t epoch_seed);

// The attention cost of rows [0, num_rows) of `seq_len` input tokens each (row
// r starts at token r * seq_len): the sum of squared document segment lengths.
std::vector<uint64_t> RowAttentionCosts(const Corpus& corpus, int64_t seq_len, int64_t num_rows);

// The rows of one epoch in cost-band order (above); `epoch_seed` keys both
// shuffles. `lead` (in [0, rows_per_step)) is the number of rows at the
// epoch's start that finish a step begun in the previous epoch (steps run on
// across epochs: BatchSource), so that the whole steps line up with the
// trainer's. The rows left out of whole steps, the costliest band's, go to
// those lead positions and to the end, where they share a step with the
// neighbouring epoch's costliest rows.
std::vector<int64_t> CostBandedOrder(const std::vector<uint64_t>& costs, int64_t rows_per_step,
                                     uint64_t epoch_seed, int64_t lead = 0);

// How evenly the steps of `order` share their cost among `ranks` ranks, each
// rank taking rows_per_step / ranks consecutive rows of its step (as the
// trainer slices a step): per whole step, the most expensive rank's cost over
// the mean rank's. `epoch_max_over_mean` weighs each step by its cost: the
// epoch's work when every step lasts as long as its costliest rank, over the
// work itself (what the waiting costs in throughput).
struct StepBalance {
  int64_t steps = 0;
  double mean_max_over_mean = 0;   // averaged over the steps
  double worst_max_over_mean = 0;  // the worst step's
  double epoch_max_over_mean = 0;  // sum over steps of the max over the sum of the means
};
StepBalance MeasureStepBalance(const std::vector<int64_t>& order,
                               const std::vector<uint64_t>& costs, int64_t rows_per_step,
                               int64_t ranks);

}  // namespace trellis::train
