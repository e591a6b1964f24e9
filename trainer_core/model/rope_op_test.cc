// RoPE's autograd function and the fused attention paths against their plain
// forms in fp64 on CPU, on fresh random inputs.
#include <gtest/gtest.h>

#include "trainer_core/model/fusions.h"
#include "trainer_core/model/layers.h"
#include "trainer_core/model/model_test_util.h"
#include "trainer_core/model/rope_op.h"

namespace trellis::train {
namespace {

constexpr auto kF64 = torch::kDouble;

// The rotation written out position by position, for autograd to differentiate.
torch::Tensor RotatePlain(const torch::Tensor& x, const RopeCache& rope) {
  const int64_t t = x.size(1), half = x.size(3) / 2;
  std::vector<torch::Tensor> rows;
  for (int64_t p = 0; p < t; ++p) {
    auto xp = x.select(1, p);  // [b, heads, d]
    auto c = rope.cos[p], s = rope.sin[p];
    auto x1 = xp.narrow(-1, 0, half), x2 = xp.narrow(-1, half, half);
    rows.push_back(torch::cat({x1 * c - x2 * s, x1 * s + x2 * c}, -1));
  }
  return torch::stack(rows, 1);
}

TEST(RopeTest, RotatesAStridedViewAndDifferentiatesAsThePlainForm) {
  const uint64_t seed = testing::FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  const RopeCache rope = BuildRope(16, 8, 10000.0, torch::kCPU, kF64);
  // q out of a joint [b, t, 6 heads, d] projection: a strided view.
  auto joint = torch::randn({2, 5, 6, 8}, kF64).requires_grad_(true);
  auto q = joint.narrow(2, 1, 3);
  auto grad = torch::randn({2, 5, 3, 8}, kF64);

  auto y = Rope(q, rope);
  EXPECT_TRUE(y.is_contiguous());
  auto dy = torch::autograd::grad({y}, {joint}, {grad})[0];
  auto y_ref = RotatePlain(q, rope);
  auto dy_ref = torch::autograd::grad({y_ref}, {joint}, {grad})[0];
  EXPECT_TRUE(torch::allclose(y, y_ref, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(dy, dy_ref, 1e-12, 1e-12));
  // A rotation keeps every pair's norm.
  EXPECT_TRUE(torch::allclose(y.pow(2).sum(), q.pow(2).sum(), 1e-12, 1e-12));
}

TEST(RopeTest, RefusesAnOddHeadDimAndShortTables) {
  const RopeCache rope = BuildRope(4, 8, 10000.0, torch::kCPU, kF64);
  EXPECT_THROW(Rope(torch::zeros({1, 4, 2, 7}, kF64), rope), c10::Error);
  EXPECT_THROW(Rope(torch::zeros({1, 5, 2, 8}, kF64), rope), c10::Error);
}

// Grouped-query attention inside the attention op (where LibTorch has it)
// computes what repeating k and v to every query head does.
TEST(AttentionPathsTest, FusedAndPlainPathsAgree) {
  const uint64_t seed = testing::FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  const int64_t b = 2, t = 6, h = 16, heads = 4, kv_heads = 2, d = h / heads;
  const RopeCache rope = BuildRope(t, d, 10000.0, torch::kCPU, kF64);
  auto x = torch::randn({b, t, h}, kF64).requires_grad_(true);
  auto w = [&](int64_t rows) { return (0.3 * torch::randn({rows, h}, kF64)).requires_grad_(); };
  AttentionWeights aw{w(heads * d), w(kv_heads * d), w(kv_heads * d), w(h), heads, kv_heads};
  auto grad = torch::randn({b, t, h}, kF64);
  auto doc_ids = torch::tensor({0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2}).view({b, t});
  for (const auto& mask : {torch::Tensor(), DocumentCausalMask(doc_ids)}) {
    std::vector<std::vector<torch::Tensor>> results;
    for (const char* off : {"", "sdpa_gqa"}) {
      SCOPED_TRACE(std::string("fusions off: ") + off);
      auto y = AttentionForward(x, aw, rope, mask, ParseFusionsOff(off));
      auto grads = torch::autograd::grad({y}, {x, aw.wq, aw.wk, aw.wv, aw.wo}, {grad});
      grads.insert(grads.begin(), y);
      if (!results.empty()) {
        for (size_t i = 0; i < grads.size(); ++i)
          EXPECT_TRUE(torch::allclose(grads[i], results[0][i], 1e-10, 1e-12)) << "output " << i;
      }
      results.push_back(grads);
    }
  }
}

}  // namespace
}  // namespace trellis::train
