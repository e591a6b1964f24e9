// How evenly the ranks of a step share its attention work under each row
// order (trainer_core/data/row_order.h), on a real corpus: for each seq_len,
// the rows' costs (sum of squared document lengths) and, over one epoch,
// the mean and worst step's costliest rank over its mean rank, shuffled
// against cost bands. One JSON object per line on standard output
// (bench/data/run.sh tables them).
//   row_balance CORPUS --seq-len 8192 --seq-len 32768 --ranks 8 [--rows-per-rank 1] [--seed 1234]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "trainer_core/data/batches.h"
#include "trainer_core/data/corpus.h"
#include "trainer_core/data/row_order.h"
#include "trainer_core/error.h"

using namespace trellis::train;

namespace {

nlohmann::ordered_json Balance(const StepBalance& b) {
  return {{"steps", b.steps},
          {"mean_max_over_mean", b.mean_max_over_mean},
          {"worst_max_over_mean", b.worst_max_over_mean},
          {"epoch_max_over_mean", b.epoch_max_over_mean}};
}

std::vector<int64_t> Epoch(BatchSource& source) {
  std::vector<int64_t> order(static_cast<size_t>(source.num_rows()));
  for (int64_t k = 0; k < source.num_rows(); ++k) order[static_cast<size_t>(k)] = source.RowAt(k);
  return order;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Step balance of the row orders on a corpus"};
  std::string path;
  std::vector<int64_t> seq_lens;
  int64_t ranks = 8, rows_per_rank = 1;
  uint64_t seed = 1234;
  app.add_option("corpus", path, "corpus file (trellis-corpus build)")->required();
  app.add_option("--seq-len", seq_lens, "row length in tokens (repeatable)")->required();
  app.add_option("--ranks", ranks, "ranks sharing a step")->check(CLI::Range(1, 1 << 20));
  app.add_option("--rows-per-rank", rows_per_rank, "rows of each rank per step")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--seed", seed, "training.seed");
  CLI11_PARSE(app, argc, argv);
  try {
    const Corpus corpus = ReadCorpus(path);
    std::vector<uint64_t> lengths;
    for (size_t d = 0; d < corpus.doc_starts.size(); ++d)
      lengths.push_back((d + 1 < corpus.doc_starts.size() ? corpus.doc_starts[d + 1]
                                                          : corpus.tokens.size()) -
                        corpus.doc_starts[d]);
    std::sort(lengths.begin(), lengths.end());
    for (int64_t seq_len : seq_lens) {
      const int64_t rows_per_step = ranks * rows_per_rank;
      BatchSource shuffled(&corpus, seq_len, rows_per_step, seed);
      BatchSource banded(&corpus, seq_len, rows_per_step, seed, RowOrder::kCostBands);
      const std::vector<uint64_t> costs = RowAttentionCosts(corpus, seq_len, shuffled.num_rows());
      std::vector<uint64_t> sorted = costs;
      std::sort(sorted.begin(), sorted.end());
      const double full = static_cast<double>(seq_len) * static_cast<double>(seq_len);
      nlohmann::ordered_json j{
          {"corpus_tokens", corpus.tokens.size()},
          {"corpus_documents", corpus.doc_starts.size()},
          {"median_document_tokens", lengths[lengths.size() / 2]},
          {"seq_len", seq_len},
          {"ranks", ranks},
          {"rows_per_rank", rows_per_rank},
          {"rows", shuffled.num_rows()},
          {"row_cost_min_over_seq_len_sq", static_cast<double>(sorted.front()) / full},
          {"row_cost_median_over_seq_len_sq", static_cast<double>(sorted[sorted.size() / 2]) / full},
          {"rows_of_one_document",
           std::count(costs.begin(), costs.end(), static_cast<uint64_t>(seq_len * seq_len))},
          {"shuffled", Balance(MeasureStepBalance(Epoch(shuffled), costs, rows_per_step, ranks))},
          {"cost_bands", Balance(MeasureStepBalance(Epoch(banded), costs, rows_per_step, ranks))}};
      std::cout << j.dump() << std::endl;
    }
  } catch (const TrainError& e) {
    std::cerr << "row_balance: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
