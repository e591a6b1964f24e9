#include "trainer_core/model/model.h"
#include "trainer_core/model/layers.h"
#include "trainer_core/model/model_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>
#include <random>
#include <utility>
#include <vector>

namespace trellis::train {
namespace {

using testing::FreshSeed;
using testing::RandomBatch;
using testing::TinySpec;

// A document (or a later token) leaking into another's loss moves it by far
// more than this; OpenBLAS may round the same row differently when the rows
// around it change (an expert's GEMM takes another path when its token count
// does), so equality holds only up to fp64 rounding.
constexpr double kUnseenRelTol = 1e-12;

TEST(ModelTest, GradientsMatchFiniteDifferencesInFp64) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  Model model(TinySpec(), 8, seed, torch::kCPU, torch::kDouble);
  torch::manual_seed(seed);
  for (auto& bias : model.router_bias()) bias.copy_(0.05 * torch::randn({4}));  // a live path
  TokenBatch batch = RandomBatch(seed, 32);
  const double aux_coef = 0.1;
  auto loss_at = [&] { return model.Forward(batch, torch::kDouble, aux_coef).loss.item<double>(); };

  model.ZeroGrad();
  model.Forward(batch, torch::kDouble, aux_coef).loss.backward();
  std::mt19937_64 rng(seed);
  int checked = 0;
  for (auto& block : model.blocks()) {
    auto data = block.flat.detach();
    auto grad = block.flat.grad();
    for (const auto& p : block.layout->params) {
      // A few random elements of every parameter.
      for (int trial = 0; trial < 4; ++trial) {
        const int64_t i = p.offset + static_cast<int64_t>(rng() % p.numel);
        const double h = 1e-6, x0 = data[i].item<double>();
        data[i] = x0 + h;
        const double up = loss_at();
        data[i] = x0 - h;
        const double down = loss_at();
        data[i] = x0;
        const double fd = (up - down) / (2 * h), g = grad[i].item<double>();
        EXPECT_NEAR(g, fd, 1e-7 + 1e-5 * std::fabs(fd))
            << block.layout->FullName(p) << "[" << i << "]";
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 50);
}

TEST(ModelTest, DocumentsInOneRowDoNotSeeEachOther) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  Model model(TinySpec(), 8, seed, torch::kCPU, torch::kDouble);
  TokenBatch batch = RandomBatch(seed, 32);
  // Score only the second document of row 0 (positions 3-7).
  batch.targets.narrow(1, 0, 3).fill_(-1);
  batch.targets[1].fill_(-1);
  torch::NoGradGuard no_grad;
  const double before = model.Forward(batch, torch::kDouble, 0).ce.item<double>();
  TokenBatch changed = batch;
  changed.inputs = batch.inputs.clone();
  changed.inputs.narrow(1, 0, 3).add_(1).remainder_(32);  // rewrite the first document
  EXPECT_NEAR(model.Forward(changed, torch::kDouble, 0).ce.item<double>(), before,
              kUnseenRelTol * before);
  // Control: one document over the whole row, and the change is seen.
  batch.doc_ids.zero_();
  changed.doc_ids = batch.doc_ids;
  EXPECT_NE(model.Forward(changed, torch::kDouble, 0).ce.item<double>(),
            model.Forward(batch, torch::kDouble, 0).ce.item<double>());
}

TEST(ModelTest, CausalLaterTokensDoNotChangeEarlierLosses) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  Model model(TinySpec(), 8, seed, torch::kCPU, torch::kDouble);
  TokenBatch batch = RandomBatch(seed, 32);
  batch.doc_ids.zero_();
  batch.targets.narrow(1, 4, 4).fill_(-1);  // score positions 0-3 only
  torch::NoGradGuard no_grad;
  const double before = model.Forward(batch, torch::kDouble, 0).ce.item<double>();
  batch.inputs.narrow(1, 4, 4).add_(3).remainder_(32);
  EXPECT_NEAR(model.Forward(batch, torch::kDouble, 0).ce.item<double>(), before,
              kUnseenRelTol * before);
}

TEST(ModelTest, FreshModelPredictsNearUniformAndInitIsSeeded) {
  const uint64_t seed = FreshSeed();
  spec::ModelSpec m = TinySpec();
  m.init_std = 0.02;
  Model a(m, 8, seed, torch::kCPU, torch::kFloat), b(m, 8, seed, torch::kCPU, torch::kFloat);
  Model c(m, 8, seed + 1, torch::kCPU, torch::kFloat);
  for (size_t i = 0; i < a.blocks().size(); ++i) {
    EXPECT_TRUE(torch::equal(a.blocks()[i].flat, b.blocks()[i].flat));
    EXPECT_FALSE(torch::equal(a.blocks()[i].flat, c.blocks()[i].flat));
  }
  torch::NoGradGuard no_grad;
  auto out = a.Forward(RandomBatch(seed, 32), torch::kFloat, 0);
  EXPECT_NEAR(out.ce.item<double>(), std::log(32.0), 0.1);
  int64_t routed = 0;
  for (const auto& counts : out.expert_counts) routed += counts.sum().item<int64_t>();
  EXPECT_EQ(routed, m.layers * 16 * m.experts_per_token);
}

TEST(ModelTest, Bf16ComputeTracksFp32) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  spec::ModelSpec m = TinySpec();
  m.init_std = 0.02;
  Model model(m, 8, seed, torch::kCPU, torch::kFloat);
  torch::NoGradGuard no_grad;
  TokenBatch batch = RandomBatch(seed, 32);
  double f32 = model.Forward(batch, torch::kFloat, 0).ce.item<double>();
  double bf16 = model.Forward(batch, torch::kBFloat16, 0).ce.item<double>();
  EXPECT_NEAR(bf16, f32, 0.02 * f32);  // bf16 keeps ~3 significant digits
}

}  // namespace
}  // namespace trellis::train

namespace trellis::train {
namespace {

// Attention with RoPE against a reference written out on [b, heads, t, hd]
// (attention.cc applies RoPE before the transpose), on fresh random fp64
// inputs: the same output and the same gradients for x and every weight,
// over several shapes and two tables of the same shape, with q, k and v's
// input gradients summed by the GEMMs (qkv_dgrad_sum) and by autograd.
TEST(RopeTest, AttentionMatchesTheRotationWrittenOut) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  for (auto [b, t, heads, kv, hd, theta] : {std::tuple{2, 8, 4, 2, 8, 10000.0},
                                            std::tuple{1, 5, 2, 2, 4, 10000.0},
                                            std::tuple{2, 8, 4, 2, 8, 500.0}}) {
    const RopeCache rope = BuildRope(16, hd, theta, torch::kCPU, torch::kDouble);
    auto make = [&](int64_t out) { return torch::randn({out, heads * hd}, f64) * 0.3; };
    AttentionWeights w{make(heads * hd), make(kv * hd), make(kv * hd), make(heads * hd), heads, kv};
    for (auto* p : {&w.wq, &w.wk, &w.wv, &w.wo}) p->requires_grad_(true);
    auto x = torch::randn({b, t, heads * hd}, f64).requires_grad_(true);
    auto grad_out = torch::randn({b, t, heads * hd}, f64);

    auto grads = [&](const torch::Tensor& y) {
      for (auto* p : {&x, &w.wq, &w.wk, &w.wv, &w.wo})
        if (p->grad().defined()) p->mutable_grad().zero_();
      y.backward(grad_out);
      std::vector<torch::Tensor> g;
      for (auto* p : {&x, &w.wq, &w.wk, &w.wv, &w.wo}) g.push_back(p->grad().clone());
      return g;
    };
    std::vector<std::pair<torch::Tensor, std::vector<torch::Tensor>>> got;
    for (bool summed_by_gemms : {true, false}) {
      Fusions fusions;
      fusions.qkv_dgrad_sum = summed_by_gemms;
      auto y = AttentionForward(x, w, rope, {}, fusions);
      got.emplace_back(y, grads(y));
    }

    // The same attention with RoPE written out on [b, heads, t, hd].
    auto reference = [&] {
      auto rot = [&](const torch::Tensor& v) {
        auto cos = rope.cos.narrow(0, 0, t), sin = rope.sin.narrow(0, 0, t);
        auto v1 = v.narrow(-1, 0, hd / 2), v2 = v.narrow(-1, hd / 2, hd / 2);
        return torch::cat({v1 * cos - v2 * sin, v1 * sin + v2 * cos}, -1);
      };
      auto split = [&](const torch::Tensor& wt, int64_t n) {
        return torch::matmul(x, wt.t()).view({b, t, n, hd}).transpose(1, 2);
      };
      auto q = rot(split(w.wq, heads));
      auto k = rot(split(w.wk, kv)).repeat_interleave(heads / kv, 1);
      auto v = split(w.wv, kv).repeat_interleave(heads / kv, 1);
      auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
      auto causal = torch::ones({t, t}, torch::kBool).tril();
      scores = scores.masked_fill(causal.logical_not(), -std::numeric_limits<double>::infinity());
      auto o = torch::matmul(torch::softmax(scores, -1), v);
      return torch::matmul(o.transpose(1, 2).reshape({b, t, heads * hd}), w.wo.t());
    }();
    auto reference_grads = grads(reference);
    for (size_t v = 0; v < got.size(); ++v) {
      SCOPED_TRACE(v == 0 ? "qkv_dgrad_sum on" : "qkv_dgrad_sum off");
      EXPECT_TRUE(torch::allclose(got[v].first, reference, 1e-10, 1e-12));
      for (size_t i = 0; i < reference_grads.size(); ++i)
        EXPECT_TRUE(torch::allclose(got[v].second[i], reference_grads[i], 1e-9, 1e-12))
            << "gradient " << i << " (x, wq, wk, wv, wo)";
    }
  }
}

}  // namespace
}  // namespace trellis::train
