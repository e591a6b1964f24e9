#include "trainer_core/model/init.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/model_layout/model_layout.h"

namespace trellis::train {
namespace {

uint64_t FreshSeed() {
  static std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

TEST(InitTest, AnySliceDrawsTheSameValuesAsTheWhole) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::vector<float> whole(10000);
  FillTruncatedNormal(seed, 0, whole.size(), 0.02, whole.data());
  // Shards of uneven sizes, as different world sizes would cut them.
  for (int64_t shards : {2, 3, 7}) {
    std::vector<float> pieced;
    const int64_t n = whole.size();
    for (int64_t s = 0; s < shards; ++s) {
      int64_t first = n * s / shards, last = n * (s + 1) / shards;
      std::vector<float> part(last - first);
      FillTruncatedNormal(seed, first, last - first, 0.02, part.data());
      pieced.insert(pieced.end(), part.begin(), part.end());
    }
    EXPECT_EQ(pieced, whole) << shards << " shards";
  }
}

TEST(InitTest, LargeFillsSplitOverThreadsDrawTheSameValues) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  const int64_t n = (int64_t{1} << 21) + 12345, first = 777;  // several threads' worth
  std::vector<float> big(n);
  FillTruncatedNormal(seed, first, n, 0.02, big.data());
  for (int64_t i : {int64_t{0}, int64_t{1} << 20, (int64_t{1} << 20) + 1, n / 2, n - 1})
    EXPECT_EQ(big[i], static_cast<float>(TruncatedNormalAt(seed, first + i, 0.02))) << i;
}

TEST(InitTest, TruncatedNormalHasTheTruncatedMoments) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  const int n = 400000;
  const double std = 3.0;
  std::vector<double> v(n);
  FillTruncatedNormal(seed, 0, n, std, v.data());
  double sum = 0, sq = 0;
  for (double x : v) {
    ASSERT_LE(std::fabs(x), 2 * std + 1e-12);
    sum += x;
    sq += x * x;
  }
  // Normal truncated to +-2 sigma: variance factor 1 - 2*2*phi(2)/(2*Phi(2)-1).
  const double phi2 = std::exp(-2.0) / std::sqrt(2 * M_PI);
  const double mass = std::erf(2 / std::sqrt(2.0));
  const double want_std = std * std::sqrt(1 - 4 * phi2 / mass);  // ~0.8796 std
  const double mean = sum / n, got_std = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0, 5 * want_std / std::sqrt(n));
  EXPECT_NEAR(got_std / want_std, 1, 0.005);
}

TEST(InitTest, QuantileInvertsTheNormalCdf) {
  std::mt19937_64 rng(FreshSeed());
  // Up to +4.5 only: above, p = Phi(x) rounds to within 1e-16 of 1 and that
  // rounding alone moves the exact quantile by more than the tolerance.
  std::uniform_real_distribution<double> u(-6, 4.5);
  for (int i = 0; i < 2000; ++i) {
    double x = u(rng);
    double p = 0.5 * std::erfc(-x / std::sqrt(2.0));
    EXPECT_NEAR(NormalQuantile(p), x, 1e-9 * std::max(1.0, std::fabs(x))) << p;
  }
}

TEST(InitTest, ParametersGetIndependentStreams) {
  const uint64_t seed = FreshSeed();
  EXPECT_NE(ParamSeed(seed, "layers.0.wq"), ParamSeed(seed, "layers.0.wk"));
  EXPECT_NE(ParamSeed(seed, "layers.0.wq"), ParamSeed(seed, "layers.1.wq"));
  EXPECT_NE(ParamSeed(seed, "layers.0.wq"), ParamSeed(seed + 1, "layers.0.wq"));
  EXPECT_EQ(ParamSeed(seed, "final.head"), ParamSeed(seed, "final.head"));
}

TEST(LayoutTest, BlocksAreContiguousAndExpertsStacked) {
  spec::ModelSpec m;
  m.layers = 3;
  m.shared_expert = true;
  auto blocks = ModelLayout(m);
  ASSERT_EQ(blocks.size(), 5u);
  EXPECT_EQ(blocks[0].name, "embed");
  EXPECT_EQ(blocks[2].name, "layers.1");
  EXPECT_EQ(blocks[4].name, "final");
  for (const auto& b : blocks) {
    int64_t next = 0;
    for (const auto& p : b.params) {
      EXPECT_EQ(p.offset, next) << b.FullName(p);
      next += p.numel;
    }
    EXPECT_EQ(next, b.numel);
  }
  const auto& gate = blocks[1].Find("w_gate");
  EXPECT_EQ(gate.shape, (std::vector<int64_t>{m.experts, m.expert_hidden, m.hidden}));
  EXPECT_EQ(gate.optim, Optim::kMuon);
  EXPECT_EQ(blocks[1].Find("router").optim, Optim::kAdamW);
  EXPECT_EQ(blocks[1].Find("attn_norm").optim, Optim::kAdamW);
  EXPECT_FALSE(blocks[1].Find("attn_norm").decay);
}

}  // namespace
}  // namespace trellis::train
