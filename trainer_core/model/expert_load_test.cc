// ExpertLoadFigures against a plain loop over fresh random counts, and the
// cases a reader would check by hand.
#include "trainer_core/model/expert_load.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace trellis::train {
namespace {

// The reference, in doubles: per layer, its busiest part summed over the
// forwards over its mean part summed likewise; the worst layer.
// loads[forward][layer][part].
double WorstRatio(const std::vector<std::vector<std::vector<double>>>& loads) {
  double worst = 0;
  for (size_t l = 0; l < loads.front().size(); ++l) {
    double most = 0, mean = 0;
    for (const auto& forward : loads) {
      const auto& parts = forward[l];
      double sum = 0, max = 0;
      for (double v : parts) {
        sum += v;
        max = std::max(max, v);
      }
      most += max;
      mean += sum / static_cast<double>(parts.size());
    }
    worst = std::max(worst, mean == 0 ? 1.0 : most / mean);
  }
  return worst;
}

TEST(ExpertLoadTest, MatchesALoopOnRandomCounts) {
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t ep = std::vector<int64_t>{1, 2, 4}[rng() % 3];
    const int64_t experts = ep * (1 + rng() % 8), layers = 1 + rng() % 5,
                  forwards = 1 + rng() % 4;
    std::vector<std::vector<torch::Tensor>> counts(forwards);
    std::vector<std::vector<std::vector<double>>> per_expert(forwards), per_block(forwards);
    for (int64_t f = 0; f < forwards; ++f) {
      for (int64_t l = 0; l < layers; ++l) {
        auto c = torch::randint(0, 5000, {experts}, torch::kLong);
        counts[f].push_back(c);
        std::vector<double> e(experts), b(ep, 0.0);
        for (int64_t i = 0; i < experts; ++i) {
          e[i] = static_cast<double>(c[i].item<int64_t>());
          b[i / (experts / ep)] += e[i];
        }
        per_expert[f].push_back(e);
        per_block[f].push_back(b);
      }
    }
    const auto got = ExpertLoadFigures(counts, ep);
    ASSERT_EQ(got.scalar_type(), torch::kDouble);
    EXPECT_NEAR(got[0].item<double>(), WorstRatio(per_expert), 1e-12) << "trial " << trial;
    EXPECT_NEAR(got[1].item<double>(), WorstRatio(per_block), 1e-12) << "trial " << trial;
  }
}

TEST(ExpertLoadTest, EvenIsOneAndTheWorstLayerCounts) {
  // Layer 0 even; layer 1 sends 6 of 8 pairs to expert 0: 6 / 2 = 3; its EP
  // blocks of 2 experts hold 7 and 1: 7 / 4 = 1.75.
  const auto got = ExpertLoadFigures(
      {{torch::tensor({2, 2, 2, 2}), torch::tensor({6.0f, 1.0f, 0.0f, 1.0f})}}, 2);
  EXPECT_DOUBLE_EQ(got[0].item<double>(), 3.0);
  EXPECT_DOUBLE_EQ(got[1].item<double>(), 1.75);
  // One EP rank: the whole layer is its block.
  EXPECT_DOUBLE_EQ(ExpertLoadFigures({{torch::tensor({6, 1, 0, 1})}}, 1)[1].item<double>(), 1.0);
  // A layer that routed nothing is even, not NaN.
  EXPECT_DOUBLE_EQ(ExpertLoadFigures({{torch::zeros({4})}}, 2)[0].item<double>(), 1.0);
}

// Two micro-batches whose busiest experts differ: summed, the step looks even
// (6, 2, 6, 2; EP blocks 8 and 8), but each forward waited for its own
// busiest expert (6 of a mean 2) and EP rank (7 of a mean 4).
TEST(ExpertLoadTest, EachForwardPaysForItsOwnBusiestExpert) {
  const auto got = ExpertLoadFigures(
      {{torch::tensor({6, 1, 0, 1})}, {torch::tensor({0, 1, 6, 1})}}, 2);
  EXPECT_DOUBLE_EQ(got[0].item<double>(), 3.0);
  EXPECT_DOUBLE_EQ(got[1].item<double>(), 1.75);
  const auto summed = ExpertLoadFigures({{torch::tensor({6, 2, 6, 2})}}, 2);
  EXPECT_DOUBLE_EQ(summed[0].item<double>(), 1.5);
  EXPECT_DOUBLE_EQ(summed[1].item<double>(), 1.0);
}

TEST(ExpertLoadTest, RefusesShapesItCannotSplit) {
  EXPECT_THROW(ExpertLoadFigures({}, 1), std::invalid_argument);
  EXPECT_THROW(ExpertLoadFigures({{}}, 1), std::invalid_argument);
  EXPECT_THROW(ExpertLoadFigures({{torch::ones({6})}}, 4), std::invalid_argument);
  EXPECT_THROW(ExpertLoadFigures({{torch::ones({4}), torch::ones({8})}}, 2),
               std::invalid_argument);
  EXPECT_THROW(ExpertLoadFigures({{torch::ones({4}), torch::ones({4})}, {torch::ones({4})}}, 2),
               std::invalid_argument);
}

}  // namespace
}  // namespace trellis::train
