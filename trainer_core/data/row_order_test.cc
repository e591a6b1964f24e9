// Cost-banded row order (row_order.h) against simple references on random
// corpora: costs per row from the documents of each token, the order a
// permutation of the rows, each step's rows from one band, and the steps'
// balance between ranks against a shuffled order's.
#include "trainer_core/data/row_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <climits>
#include <set>

#include "trainer_core/data/batches.h"
#include "trainer_core/error.h"

namespace trellis::train {
namespace {

// Documents whose lengths follow a log-normal law (median `median` tokens),
// as text corpora do: many short documents and a few long ones.
Corpus RandomCorpus(std::mt19937_64& rng, int64_t tokens, double median) {
  std::vector<uint64_t> starts;
  std::lognormal_distribution<double> length(std::log(median), 1.5);
  for (uint64_t start = 0; start < static_cast<uint64_t>(tokens);) {
    starts.push_back(start);
    start += 1 + static_cast<uint64_t>(length(rng));
  }
  return OwnedCorpus(256, std::vector<uint16_t>(static_cast<size_t>(tokens)), std::move(starts));
}

// The reference: each token's document found on its own, then the run lengths.
uint64_t CostByTokens(const Corpus& c, int64_t seq_len, int64_t row) {
  uint64_t cost = 0, run = 0;
  int64_t last_doc = -1;
  for (int64_t i = 0; i < seq_len; ++i) {
    const auto pos = static_cast<uint64_t>(row * seq_len + i);
    const auto doc = std::upper_bound(c.doc_starts.begin(), c.doc_starts.end(), pos) -
                     c.doc_starts.begin() - 1;
    if (doc != last_doc) {
      cost += run * run;
      run = 0;
      last_doc = doc;
    }
    ++run;
  }
  return cost + run * run;
}

TEST(RowOrderTest, RowCostsAreTheSquaredDocumentLengthsOfEachRow) {
  std::mt19937_64 rng(std::random_device{}());
  for (double median : {3.0, 40.0, 2000.0}) {
    const Corpus c = RandomCorpus(rng, 20000, median);
    const int64_t seq_len = 97, rows = 20000 / seq_len - 1;
    const std::vector<uint64_t> costs = RowAttentionCosts(c, seq_len, rows);
    ASSERT_EQ(static_cast<int64_t>(costs.size()), rows);
    for (int64_t r = 0; r < rows; ++r)
      ASSERT_EQ(costs[r], CostByTokens(c, seq_len, r)) << "row " << r << ", median " << median;
  }
  const Corpus one = OwnedCorpus(256, std::vector<uint16_t>(1000), {0});  // one document:
  // every row costs seq_len^2
  for (uint64_t cost : RowAttentionCosts(one, 100, 9)) EXPECT_EQ(cost, 100u * 100u);
}

TEST(RowOrderTest, CostBandsArePermutationsKeyedByTheSeed) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<uint64_t> costs(1003);
  for (auto& c : costs) c = 1 + rng() % 5000;
  const std::vector<int64_t> a = CostBandedOrder(costs, 8, 11);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1003; ++i) ASSERT_EQ(sorted[i], i) << "not a permutation";
  EXPECT_EQ(CostBandedOrder(costs, 8, 11), a) << "a pure function of the seed";
  EXPECT_NE(CostBandedOrder(costs, 8, 12), a);
  // The 3 rows past the last whole step come last, from the costliest band.
  const int64_t top = CostBand(*std::max_element(costs.begin(), costs.end()));
  for (auto it = a.end() - 3; it != a.end(); ++it) EXPECT_EQ(CostBand(costs[*it]), top);
  EXPECT_THROW(CostBandedOrder(costs, 0, 1), TrainError);
  EXPECT_THROW(CostBandedOrder(costs, 8, 1, 8), TrainError);
  // With 5 rows finishing the previous epoch's step, whole steps start at
  // position 5: those 5 and the 6 at the end are the costliest band's.
  const std::vector<int64_t> led = CostBandedOrder(costs, 8, 11, 5);
  for (int64_t i : {0, 1, 2, 3, 4, 997, 998, 999, 1000, 1001, 1002})
    EXPECT_GE(CostBand(costs[led[i]]), top - 1) << "position " << i;
}

TEST(RowOrderTest, BandsAreFivePercentWide) {
  EXPECT_EQ(CostBand(1), 0);
  for (uint64_t c : {7ull, 1000ull, 4096ull * 4096, 65536ull * 65536}) {
    const double lo = std::pow(1 + kBandWidth, CostBand(c));
    EXPECT_LE(lo, static_cast<double>(c) * (1 + 1e-12)) << c;
    EXPECT_GT(lo * (1 + kBandWidth), static_cast<double>(c)) << c;
    // 1.2 = 1.05^3.74: three or four bands up.
    const int64_t up = CostBand(static_cast<uint64_t>(static_cast<double>(c) * 1.2)) - CostBand(c);
    EXPECT_TRUE(up == 3 || up == 4) << c << ": " << up;
  }
}

// Steps never interleave bands (a step's rows are neighbours in cost order);
// where bands are full, a step's rows come from one band or two neighbouring
// ones; rows of the same cost are spread over the epoch in a random order.
TEST(RowOrderTest, EachStepTakesNeighbouringRowsInCostOrder) {
  std::mt19937_64 rng(std::random_device{}());
  for (int64_t rows_per_step : {1, 4, 6}) {
    for (bool dense : {false, true}) {
      std::vector<uint64_t> costs(3000);
      for (auto& c : costs)
        c = rng() % 2 ? 1'000'000 : (dense ? 1'000'000 + rng() % 1'000'000 : 1 + rng() % 1'000'000);
      const std::vector<int64_t> order = CostBandedOrder(costs, rows_per_step, rng());
      const int64_t steps = 3000 / rows_per_step;
      std::vector<std::pair<int64_t, int64_t>> spans;  // per step: lowest and highest band
      int64_t top_steps_in_first_quarter = 0;
      for (int64_t s = 0; s < steps; ++s) {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        bool all_top = true;
        for (int64_t i = 0; i < rows_per_step; ++i) {
          const uint64_t c = costs[order[s * rows_per_step + i]];
          lo = std::min(lo, CostBand(c));
          hi = std::max(hi, CostBand(c));
          all_top = all_top && c == 1'000'000;
        }
        if (dense) {
          ASSERT_LE(hi - lo, 1) << "step " << s << ", rows_per_step " << rows_per_step;
        }
        spans.emplace_back(lo, hi);
        if (s < steps / 4) top_steps_in_first_quarter += all_top;
      }
      std::sort(spans.begin(), spans.end());
      for (size_t i = 1; i < spans.size(); ++i)
        ASSERT_LE(spans[i - 1].second, spans[i].first) << "steps interleave bands";
      EXPECT_GT(top_steps_in_first_quarter, 0)
          << "the steps of the most common cost are not spread over the epoch";
    }
  }
}

TEST(RowOrderTest, StepBalanceIsTheCostliestRankOverTheMean) {
  // Two steps of 4 rows over 2 ranks: ranks cost {1+1, 3+3} then {5+5, 5+5}.
  const std::vector<uint64_t> costs{1, 1, 3, 3, 5, 5, 5, 5};
  const std::vector<int64_t> order{0, 1, 2, 3, 4, 5, 6, 7};
  StepBalance b = MeasureStepBalance(order, costs, 4, 2);
  EXPECT_EQ(b.steps, 2);
  EXPECT_DOUBLE_EQ(b.worst_max_over_mean, 6.0 / 4.0);
  EXPECT_DOUBLE_EQ(b.mean_max_over_mean, (1.5 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(b.epoch_max_over_mean, (6.0 + 10.0) / (4.0 + 10.0));
  EXPECT_THROW(MeasureStepBalance(order, costs, 4, 3), TrainError);
}

// The point of it: shuffled rows of a corpus of mixed document lengths leave
// a step's ranks far apart; cost bands bring them within a few percent.
TEST(RowOrderTest, CostBandsBalanceTheRanksOfAStep) {
  std::mt19937_64 rng(std::random_device{}());
  const int64_t seq_len = 1024, ranks = 8;
  const Corpus c = RandomCorpus(rng, 3'000'000, 300.0);
  BatchSource shuffled(&c, seq_len, ranks, 5), banded(&c, seq_len, ranks, 5, RowOrder::kCostBands);
  const int64_t rows = shuffled.num_rows();
  const std::vector<uint64_t> costs = RowAttentionCosts(c, seq_len, rows);
  std::vector<int64_t> a, b;
  for (int64_t k = 0; k < rows; ++k) {
    a.push_back(shuffled.RowAt(k));
    b.push_back(banded.RowAt(k));
  }
  EXPECT_EQ(std::set<int64_t>(b.begin(), b.end()).size(), static_cast<size_t>(rows))
      << "every row once per epoch";
  const StepBalance before = MeasureStepBalance(a, costs, ranks, ranks);
  const StepBalance after = MeasureStepBalance(b, costs, ranks, ranks);
  // Measured: about 1.31 shuffled (worst step 2.05), 1.015 banded (worst 1.2).
  EXPECT_GT(before.mean_max_over_mean, 1.2);
  EXPECT_LT(after.mean_max_over_mean, 1.05);
  EXPECT_LT(after.worst_max_over_mean, before.worst_max_over_mean);
  // Steps run on across epochs, and the epochs here do not line up with
  // them: the trainer's steps of three epochs stay balanced.
  ASSERT_NE(rows % ranks, 0);
  std::vector<int64_t> steps;
  for (int64_t k = 0; k < 3 * rows / ranks * ranks; ++k) steps.push_back(banded.RowAt(k));
  EXPECT_NE(std::vector<int64_t>(steps.begin() + rows, steps.begin() + 2 * rows), b)
      << "each epoch in another order";
  EXPECT_LT(MeasureStepBalance(steps, costs, ranks, ranks).mean_max_over_mean, 1.05);
}

TEST(RowOrderTest, NamesAreParsedAndOthersRefusedNamingTheChoices) {
  EXPECT_EQ(ParseRowOrder("shuffled"), RowOrder::kShuffled);
  EXPECT_EQ(ParseRowOrder("cost_bands"), RowOrder::kCostBands);
  try {
    ParseRowOrder("sorted");
    FAIL() << "expected a refusal";
  } catch (const TrainError& e) {
    EXPECT_NE(std::string(e.what()).find("\"shuffled\" or \"cost_bands\""), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace trellis::train
