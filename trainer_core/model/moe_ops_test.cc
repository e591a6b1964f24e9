// The MoE dispatch and combine ops (moe_ops.h) and the router's expert
// choice (layers.h) (part of model_test).
#include "trainer_core/model/moe_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "trainer_core/model/layers.h"
#include "trainer_core/model/model_test_util.h"
// On CPU they take their ATen paths, whose backwards are written by hand:
// fresh fp64 inputs must give the plain expressions' values and gradients.

namespace trellis::train {
namespace {

using testing::FreshSeed;

// A dispatch order as MoeForward builds it: slots sorted by expert, stable.
struct Routing {
  torch::Tensor row_to_slot, slot_to_row;  // int64
};
Routing RandomRouting(int64_t n, int64_t k, int64_t experts, bool one_expert_per_token) {
  auto ids = torch::randint(experts, {n, k}, torch::kLong);
  if (one_expert_per_token) ids = ids.narrow(1, 0, 1).expand({n, k}).contiguous();
  auto order = std::get<1>(torch::sort(ids.reshape(-1), /*stable=*/true, 0, false));
  auto inverse = torch::empty_like(order).scatter_(0, order, torch::arange(n * k));
  return {order, inverse};
}

bool Close(const torch::Tensor& got, const torch::Tensor& want) {
  return got.sizes() == want.sizes() && got.scalar_type() == want.scalar_type() &&
         torch::allclose(got, want, 1e-12, 1e-14);
}

TEST(MoeOpsTest, DispatchAndCombineMatchThePlainExpressionsInFp64) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  for (auto [n, k, h, experts, one_expert] :
       {std::tuple{7, 1, 5, 3, false}, std::tuple{6, 2, 4, 4, false},
        std::tuple{9, 4, 3, 5, false}, std::tuple{8, 4, 6, 6, true},
        std::tuple{1, 4, 2, 1, false}}) {
    SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k));
    const Routing r = RandomRouting(n, k, experts, one_expert);
    const auto token_of = r.row_to_slot.div(k, "floor");
    for (auto index_type : {torch::kLong, torch::kInt}) {
      const auto row_to_slot = r.row_to_slot.to(index_type);
      const auto slot_to_row = r.slot_to_row.to(index_type);

      auto x = torch::randn({n, h}, f64).requires_grad_(true);
      auto rows = DispatchRows(x, row_to_slot, slot_to_row, k);
      auto rows_want = x.index_select(0, token_of);
      EXPECT_TRUE(torch::equal(rows, rows_want));
      auto grad_rows = torch::randn({n * k, h}, f64);
      auto gx = torch::autograd::grad({rows}, {x}, {grad_rows});
      auto gx_want = torch::autograd::grad({rows_want}, {x}, {grad_rows});
      EXPECT_TRUE(Close(gx[0], gx_want[0]));

      // The plain combine is MoeForward's CPU branch: a weighted index_add.
      auto expert_out = torch::randn({n * k, h}, f64).requires_grad_(true);
      auto gates = torch::rand({n, k}, f64).requires_grad_(true);
      auto y = CombineSlots(expert_out, gates, row_to_slot, slot_to_row, k);
      auto slot_gates = gates.reshape(-1).index_select(0, r.row_to_slot).unsqueeze(1);
      auto y_want = torch::zeros({n, h}, f64).index_add(0, token_of, expert_out * slot_gates);
      EXPECT_TRUE(Close(y, y_want));
      auto grad_y = torch::randn({n, h}, f64);
      auto g = torch::autograd::grad({y}, {expert_out, gates}, {grad_y});
      auto g_want = torch::autograd::grad({y_want}, {expert_out, gates}, {grad_y});
      EXPECT_TRUE(Close(g[0], g_want[0])) << "expert_out";
      EXPECT_TRUE(Close(g[1], g_want[1])) << "gates";
    }
  }
}

// MoeForward's CUDA branch (DispatchRunCombine) against its CPU branch, with
// experts that depend on the dispatch row: the same outputs and gradients for
// x, the gates and the experts' weights.
TEST(MoeOpsTest, DispatchRunCombineIsMoeForwardsCpuBranch) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  for (int64_t k : {1, 2, 4}) {
    SCOPED_TRACE("k=" + std::to_string(k));
    const int64_t n = 10, h = 6;
    const Routing r = RandomRouting(n, k, 5, false);
    auto x = torch::randn({n, h}, f64).requires_grad_(true);
    auto gates = torch::rand({n, k}, f64).requires_grad_(true);
    auto scale = torch::randn({n * k, 1}, f64).requires_grad_(true);
    auto run = [&](const torch::Tensor& xs) { return torch::tanh(xs * scale); };

    auto y = DispatchRunCombine(x, gates, r.row_to_slot, k, run);
    auto token_of = r.row_to_slot.div(k, "floor");
    auto slot_gates = gates.reshape(-1).index_select(0, r.row_to_slot).unsqueeze(1);
    auto y_want = torch::zeros_like(x).index_add(0, token_of, run(x.index_select(0, token_of)) *
                                                                  slot_gates);
    EXPECT_TRUE(Close(y, y_want));
    auto grad_y = torch::randn({n, h}, f64);
    auto g = torch::autograd::grad({y}, {x, gates, scale}, {grad_y});
    auto g_want = torch::autograd::grad({y_want}, {x, gates, scale}, {grad_y});
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_TRUE(Close(g[i], g_want[i])) << "gradient " << i << " (x, gates, scale)";
  }
}

// The experts a token gets, written out: for each group of consecutive
// experts, its k / groups best by score (all experts one group when groups 1).
std::vector<std::set<int64_t>> ChoiceWrittenOut(const torch::Tensor& scores, int64_t k,
                                                int64_t groups) {
  const int64_t n = scores.size(0), e = scores.size(1), size = e / groups;
  auto a = scores.accessor<double, 2>();
  std::vector<std::set<int64_t>> out(n);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t g = 0; g < groups; ++g) {
      std::vector<int64_t> ids(size);
      std::iota(ids.begin(), ids.end(), g * size);
      std::sort(ids.begin(), ids.end(), [&](int64_t x, int64_t y) { return a[t][x] > a[t][y]; });
      out[t].insert(ids.begin(), ids.begin() + k / groups);
    }
  return out;
}

TEST(ChooseExpertsTest, EachGroupGivesItsBestExperts) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  for (auto [e, k, groups] : {std::tuple{8, 4, 4}, std::tuple{8, 4, 2}, std::tuple{12, 6, 3},
                              std::tuple{6, 2, 1}, std::tuple{16, 8, 4}, std::tuple{4, 4, 4}}) {
    SCOPED_TRACE("experts=" + std::to_string(e) + " k=" + std::to_string(k) +
                 " groups=" + std::to_string(groups));
    const int64_t n = 33;
    auto scores = torch::rand({n, e}, torch::kDouble);  // distinct almost surely
    auto chosen = ChooseExperts(scores, k, groups);
    ASSERT_EQ(chosen.sizes(), (std::vector<int64_t>{n, k}));
    const auto want = ChoiceWrittenOut(scores, k, groups);
    auto c = chosen.accessor<int64_t, 2>();
    for (int64_t t = 0; t < n; ++t) {
      std::set<int64_t> got(&c[t][0], &c[t][0] + k);
      EXPECT_EQ(got, want[t]) << "token " << t;
    }
    // The point of the groups: every group gets the same number of slots.
    auto per_group = chosen.div(e / groups, "floor").flatten();
    auto load = torch::zeros({groups}, torch::kLong).scatter_add_(0, per_group,
                                                                  torch::ones_like(per_group));
    EXPECT_TRUE(torch::equal(load, torch::full({groups}, n * k / groups, torch::kLong)));
  }
}

// MoeForward with group-limited routing and a selection bias, against each
// token's output written out in fp64: the experts of ChoiceWrittenOut on
// probabilities + bias, gated by the router's own probabilities
// renormalized over them.
// An EP rank whose expert block got no slots runs its experts on [0, H]:
// the output is empty and every weight still gets a (zero) gradient, which
// the block's reduction to its owners needs on every rank.
TEST(MoeOpsTest, LocalExpertsWithNoSlotsGiveZeroWeightGradients) {
  const int64_t e = 3, f = 4, h = 5;
  ExpertWeights w;
  w.gate = torch::randn({e, f, h}, torch::kDouble).requires_grad_();
  w.up = torch::randn({e, f, h}, torch::kDouble).requires_grad_();
  w.down = torch::randn({e, h, f}, torch::kDouble).requires_grad_();
  auto xs = torch::randn({0, h}, torch::kDouble).requires_grad_();
  auto y = RunLocalExperts(xs, torch::zeros({e}, torch::kLong), w);
  ASSERT_EQ(y.sizes(), torch::IntArrayRef({0, h}));
  y.sum().backward();
  for (const auto* t : {&w.gate, &w.up, &w.down}) {
    ASSERT_TRUE(t->grad().defined());
    EXPECT_TRUE(torch::equal(t->grad(), torch::zeros_like(*t)));
  }
}

TEST(ChooseExpertsTest, MoeForwardRoutesByGroupsAndGatesByTheRouter) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  const int64_t n = 13, h = 6, f = 5, e = 8, k = 4, groups = 2;
  auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  MoeWeights w;
  w.router = torch::randn({e, h}, f64);
  w.router_bias = torch::randn({e}, f64) * 0.1;
  w.experts.gate = torch::randn({e, f, h}, f64);
  w.experts.up = torch::randn({e, f, h}, f64);
  w.experts.down = torch::randn({e, h, f}, f64);
  w.top_k = k;
  w.groups = groups;
  auto x = torch::randn({n, h}, f64);
  auto y = MoeForward(x, w).y;

  auto probs = torch::softmax(torch::matmul(x, w.router.t()), -1);
  const auto choice = ChoiceWrittenOut(probs + w.router_bias, k, groups);
  for (int64_t t = 0; t < n; ++t) {
    auto xt = x[t];
    double total = 0;
    for (int64_t ex : choice[t]) total += probs[t][ex].item<double>();
    auto want = torch::zeros({h}, f64);
    for (int64_t ex : choice[t]) {
      auto a = torch::mv(w.experts.gate[ex], xt), b = torch::mv(w.experts.up[ex], xt);
      auto hidden = a * torch::sigmoid(a) * b;
      want += probs[t][ex].item<double>() / total * torch::mv(w.experts.down[ex], hidden);
    }
    EXPECT_TRUE(torch::allclose(y[t], want, 1e-10, 1e-12)) << "token " << t;
  }
}

}  // namespace
}  // namespace trellis::train
