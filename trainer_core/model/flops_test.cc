#include "trainer_core/model/flops.h"

#include <gtest/gtest.h>

namespace trellis::train {
namespace {

spec::ModelSpec MoeBench() {
  spec::ModelSpec m;
  m.layers = 8;
  m.hidden = 2048;
  m.heads = 16;
  m.kv_heads = 4;
  m.experts = 64;
  m.experts_per_token = 8;
  m.expert_hidden = 768;
  m.vocab = 32000;
  return m;
}

TEST(FlopsTest, MoeBenchTermByTerm) {
  const spec::ModelSpec m = MoeBench();
  const double h = 2048, t = 8192;
  const double projections = 2 * h * (2048 + 512 + 512) + 2 * 2048 * h;  // 20,971,520
  const double attention = 4 * 2048 * (t + 1) / 2;                       // 33,558,528
  const double router = 2 * h * 64;
  const double experts = 8 * 3 * 2 * h * 768;  // 75,497,472
  const double head = 2 * h * 32000;
  const double forward = 8 * (projections + attention + router + experts) + head;
  EXPECT_DOUBLE_EQ(ForwardFlopsPerToken(m, 8192), forward);
  EXPECT_DOUBLE_EQ(TrainingFlopsPerToken(m, 8192), 3 * forward);
  // About 3.5 GFLOP per trained token.
  EXPECT_NEAR(TrainingFlopsPerToken(m, 8192) / 1e9, 3.52, 0.005);
}

TEST(FlopsTest, AttentionGrowsWithSequenceAndSharedExpertCounts) {
  spec::ModelSpec m = MoeBench();
  const double per_position = 4.0 * 2048 / 2 * 8;  // every layer, one more key per 2 positions
  EXPECT_DOUBLE_EQ(ForwardFlopsPerToken(m, 8194) - ForwardFlopsPerToken(m, 8192),
                   2 * per_position);
  const double before = ForwardFlopsPerToken(m, 128);
  m.shared_expert = true;
  EXPECT_DOUBLE_EQ(ForwardFlopsPerToken(m, 128) - before, 8 * 3 * 2 * 2048.0 * 768);
}

TEST(FlopsTest, NewtonSchulzCountsEveryMuonMatrixInItsWideOrientation) {
  spec::ModelSpec m;  // defaults: 2 layers, hidden 64, 4 heads / 2 kv, 4 experts of 128
  auto ns = [](double a, double b) {  // a <= b
    return 5 * (4 * a * a * b + 2 * a * a * a);
  };
  const double per_layer = ns(64, 64) + 2 * ns(32, 64) + ns(64, 64) + 3 * 4 * ns(64, 128);
  EXPECT_DOUBLE_EQ(NewtonSchulzFlopsPerStep(m, 5), 2 * per_layer);
}

}  // namespace
}  // namespace trellis::train
