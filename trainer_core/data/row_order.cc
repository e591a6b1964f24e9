#include "trainer_core/data/row_order.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "trainer_core/error.h"
#include "trainer_core/model/init.h"

namespace trellis::train {

namespace {

// Fisher-Yates over [first, last) driven by the counter hash of (seed, i).
template <typename It>
void Shuffle(It first, It last, uint64_t seed) {
  for (auto i = static_cast<int64_t>(last - first) - 1; i > 0; --i) {
    auto j = static_cast<int64_t>(CounterHash(seed, static_cast<uint64_t>(i)) %
                                  static_cast<uint64_t>(i + 1));
    std::swap(first[i], first[j]);
  }
}

}  // namespace

RowOrder ParseRowOrder(const std::string& name) {
  if (name == "shuffled") return RowOrder::kShuffled;
  if (name == "cost_bands") return RowOrder::kCostBands;
  throw TrainError("training.row_order: expected \"shuffled\" or \"cost_bands\", got \"" + name +
                   "\"");
}

std::vector<uint64_t> RowAttentionCosts(const Corpus& corpus, int64_t seq_len, int64_t num_rows) {
  const auto& starts = corpus.doc_starts;
  std::vector<uint64_t> costs(static_cast<size_t>(num_rows));
  for (int64_t r = 0; r < num_rows; ++r) {
    uint64_t pos = static_cast<uint64_t>(r * seq_len);
    const uint64_t end = pos + static_cast<uint64_t>(seq_len);
    // The first document that starts after the row's first token.
    auto next = std::upper_bound(starts.begin(), starts.end(), pos);
    uint64_t cost = 0;
    while (pos < end) {
      const uint64_t stop = next == starts.end() ? end : std::min(end, *next);
      cost += (stop - pos) * (stop - pos);
      pos = stop;
      if (next != starts.end()) ++next;
    }
    costs[static_cast<size_t>(r)] = cost;
  }
  return costs;
}

std::vector<int64_t> ShuffledOrder(int64_t num_rows, uint64_t epoch_seed) {
  std::vector<int64_t> order(static_cast<size_t>(num_rows));
  std::iota(order.begin(), order.end(), 0);
  Shuffle(order.begin(), order.end(), epoch_seed);
  return order;
}

int64_t CostBand(uint64_t cost) {
  return static_cast<int64_t>(
      std::floor(std::log(static_cast<double>(std::max<uint64_t>(cost, 1))) /
                 std::log1p(kBandWidth)));
}

std::vector<int64_t> CostBandedOrder(const std::vector<uint64_t>& costs, int64_t rows_per_step,
                                     uint64_t epoch_seed, int64_t lead) {
  if (rows_per_step < 1)
    throw TrainError("CostBandedOrder: rows_per_step must be >= 1, got " +
                     std::to_string(rows_per_step));
  if (lead < 0 || lead >= rows_per_step)
    throw TrainError("CostBandedOrder: lead must be in [0, rows_per_step = " +
                     std::to_string(rows_per_step) + "), got " + std::to_string(lead));
  const auto n = static_cast<int64_t>(costs.size());
  // Cheapest band first; within a band, a random key per (epoch, row).
  struct Key {
    int64_t band;
    uint64_t shuffle;
    int64_t row;
  };
  std::vector<Key> keys(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r)
    keys[static_cast<size_t>(r)] = {CostBand(costs[static_cast<size_t>(r)]),
                                    CounterHash(epoch_seed, static_cast<uint64_t>(r) + 1), r};
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return a.band != b.band ? a.band < b.band
                            : a.shuffle != b.shuffle ? a.shuffle < b.shuffle : a.row < b.row;
  });
  lead = std::min(lead, n);
  const int64_t steps = (n - lead) / rows_per_step, whole = steps * rows_per_step;
  std::vector<int64_t> step_order(static_cast<size_t>(steps));
  std::iota(step_order.begin(), step_order.end(), 0);
  Shuffle(step_order.begin(), step_order.end(), CounterHash(epoch_seed, 0));
  const auto row = [&](int64_t i) { return keys[static_cast<size_t>(i)].row; };
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(n));
  for (int64_t i = whole; i < whole + lead; ++i) order.push_back(row(i));
  for (int64_t s : step_order)
    for (int64_t i = s * rows_per_step; i < (s + 1) * rows_per_step; ++i) order.push_back(row(i));
  for (int64_t i = whole + lead; i < n; ++i) order.push_back(row(i));
  return order;
}

StepBalance MeasureStepBalance(const std::vector<int64_t>& order,
                               const std::vector<uint64_t>& costs, int64_t rows_per_step,
                               int64_t ranks) {
  if (ranks < 1 || rows_per_step < 1 || rows_per_step % ranks != 0)
    throw TrainError("MeasureStepBalance: ranks (" + std::to_string(ranks) +
                     ") must divide rows_per_step (" + std::to_string(rows_per_step) + ")");
  StepBalance b;
  b.steps = static_cast<int64_t>(order.size()) / rows_per_step;
  const int64_t per_rank = rows_per_step / ranks;
  double sum = 0, sum_max = 0, sum_mean = 0;
  for (int64_t s = 0; s < b.steps; ++s) {
    double most = 0, total = 0;
    for (int64_t r = 0; r < ranks; ++r) {
      double rank_cost = 0;
      for (int64_t i = 0; i < per_rank; ++i)
        rank_cost += static_cast<double>(costs[order[s * rows_per_step + r * per_rank + i]]);
      most = std::max(most, rank_cost);
      total += rank_cost;
    }
    const double mean = total / static_cast<double>(ranks);
    const double ratio = total > 0 ? most / mean : 1.0;
    sum += ratio;
    sum_max += most;
    sum_mean += mean;
    b.worst_max_over_mean = std::max(b.worst_max_over_mean, ratio);
  }
  b.mean_max_over_mean = b.steps > 0 ? sum / static_cast<double>(b.steps) : 0;
  b.epoch_max_over_mean = sum_mean > 0 ? sum_max / sum_mean : (b.steps > 0 ? 1.0 : 0);
  return b;
}

}  // namespace trellis::train
