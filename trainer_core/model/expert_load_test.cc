// ExpertLoadFigures against a plain loop over fresh random counts, and the
// cases a reader would check by hand.
#include "trainer_core/model/expert_load.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace trellis::train {
namespace {

// The reference: per layer max / mean in doubles, the worst layer.
double WorstRatio(const std::vector<std::vector<double>>& layers) {
  double worst = 0;
  for (const auto& l : layers) {
    double sum = 0, max = 0;
    for (double v : l) {
      sum += v;
      max = std::max(max, v);
    }
    worst = std::max(worst, sum == 0 ? 1.0 : max / (sum / l.size()));
  }
  return worst;
}

TEST(ExpertLoadTest, MatchesALoopOnRandomCounts) {
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t ep = std::vector<int64_t>{1, 2, 4}[rng() % 3];
    const int64_t experts = ep * (1 + rng() % 8), layers = 1 + rng() % 5;
    std::vector<torch::Tensor> counts;
    std::vector<std::vector<double>> per_expert, per_block;
    for (int64_t l = 0; l < layers; ++l) {
      auto c = torch::randint(0, 5000, {experts}, torch::kLong);
      counts.push_back(c);
      std::vector<double> e(experts), b(ep, 0.0);
      for (int64_t i = 0; i < experts; ++i) {
        e[i] = static_cast<double>(c[i].item<int64_t>());
        b[i / (experts / ep)] += e[i];
      }
      per_expert.push_back(e);
      per_block.push_back(b);
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
      {torch::tensor({2, 2, 2, 2}), torch::tensor({6.0f, 1.0f, 0.0f, 1.0f})}, 2);
  EXPECT_DOUBLE_EQ(got[0].item<double>(), 3.0);
  EXPECT_DOUBLE_EQ(got[1].item<double>(), 1.75);
  // One EP rank: the whole layer is its block.
  EXPECT_DOUBLE_EQ(ExpertLoadFigures({torch::tensor({6, 1, 0, 1})}, 1)[1].item<double>(), 1.0);
  // A layer that routed nothing is even, not NaN.
  EXPECT_DOUBLE_EQ(ExpertLoadFigures({torch::zeros({4})}, 2)[0].item<double>(), 1.0);
}

TEST(ExpertLoadTest, RefusesShapesItCannotSplit) {
  EXPECT_THROW(ExpertLoadFigures({}, 1), std::invalid_argument);
  EXPECT_THROW(ExpertLoadFigures({torch::ones({6})}, 4), std::invalid_argument);
  EXPECT_THROW(ExpertLoadFigures({torch::ones({4}), torch::ones({8})}, 2), std::invalid_argument);
}

}  // namespace
}  // namespace trellis::train
