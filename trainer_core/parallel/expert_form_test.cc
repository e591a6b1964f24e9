// expert_form.h on CPU in fp64: the compute form holds the stored parts'
// values, its gradient goes back to the stored order, and experts run from
// its views compute what they compute from separate gate and up weights.
#include "trainer_core/parallel/expert_form.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "trainer_core/model/layers.h"
#include "trainer_core/model/model_test_util.h"

namespace trellis::train {
namespace {

using testing::FreshSeed;

const auto kF64 = torch::TensorOptions().dtype(torch::kDouble);

class ExpertFormTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const uint64_t seed = FreshSeed();
    trace_ = std::make_unique<::testing::ScopedTrace>(
        __FILE__, __LINE__, "TRELLIS_TEST_SEED=" + std::to_string(seed));
    torch::manual_seed(seed);
  }
  std::unique_ptr<::testing::ScopedTrace> trace_;
};

TEST_F(ExpertFormTest, PartsOfTheFormAreTheStoredParts) {
  const int64_t count = 3, f = 4, h = 5;
  auto stored = torch::randn({3 * count * f * h}, kF64);
  auto form = torch::empty_like(stored);
  expert_form::Write(stored, form, count);
  auto parts = stored.view({3, count, f * h});
  for (int p = 0; p < 3; ++p)
    EXPECT_TRUE(torch::equal(expert_form::Part(form, count, p), parts[p])) << "part " << p;
  // Each expert's gate rows, then its up rows; down as it was.
  auto w = expert_form::Views(form, /*owners=*/1, count, f, h);
  ASSERT_EQ(w.gate_up.sizes(), (std::vector<int64_t>{count, 2 * f, h}));
  for (int64_t e = 0; e < count; ++e) {
    EXPECT_TRUE(torch::equal(w.gate_up[e].narrow(0, 0, f), parts[0][e].view({f, h})));
    EXPECT_TRUE(torch::equal(w.gate_up[e].narrow(0, f, f), parts[1][e].view({f, h})));
    EXPECT_TRUE(torch::equal(w.down[e], parts[2][e].view({h, f})));
  }
  EXPECT_FALSE(w.gate.defined() || w.up.defined());
}

TEST_F(ExpertFormTest, GradientsGoBackToTheStoredOrder) {
  const int64_t count = 2, fh = 6;
  auto stored_grad = torch::randn({3 * count * fh}, kF64);
  auto form_grad = torch::empty_like(stored_grad);
  expert_form::Write(stored_grad, form_grad, count);
  torch::Tensor into;  // the step's first contribution
  expert_form::AddTo(into, form_grad, count);
  ASSERT_EQ(into.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(into, stored_grad.to(torch::kFloat)));
  expert_form::AddTo(into, form_grad, count);  // and the next one adds
  EXPECT_TRUE(torch::allclose(into, (2 * stored_grad).to(torch::kFloat)));
}

// Gathered blocks of two owners end to end: experts in owner order.
TEST_F(ExpertFormTest, ViewsOfSeveralOwnersStackTheirExperts) {
  const int64_t count = 2, f = 3, h = 4, fh = f * h;
  auto a = torch::randn({3 * count * fh}, kF64), b = torch::randn({3 * count * fh}, kF64);
  auto fa = torch::empty_like(a), fb = torch::empty_like(b);
  expert_form::Write(a, fa, count);
  expert_form::Write(b, fb, count);
  auto w = expert_form::Views(torch::cat({fa, fb}), /*owners=*/2, count, f, h);
  ASSERT_EQ(w.down.sizes(), (std::vector<int64_t>{2 * count, h, f}));
  EXPECT_TRUE(torch::equal(w.gate_up[count + 1].narrow(0, f, f),
                           b.view({3, count, f, h})[1][1]));
  EXPECT_TRUE(torch::equal(w.down[1], a.view({3, count, h, f})[2][1]));
}

// The experts from the form's views against separate gate, up and down:
// the same outputs, and the block's gradient, put back in the stored order,
// is the separate weights' gradients stacked.
TEST_F(ExpertFormTest, ExpertsComputeTheSameFromTheForm) {
  const int64_t count = 4, f = 6, h = 5, rows = 23;
  auto stored = torch::randn({3 * count * f * h}, kF64);
  auto counts = torch::tensor({7, 0, 10, 6}, torch::kLong);
  auto xs = torch::randn({rows, h}, kF64), grad_y = torch::randn({rows, h}, kF64);

  auto plain = stored.detach().requires_grad_(true);
  auto parts = plain.view({3, count, -1}).unbind(0);
  ExpertWeights separate;
  separate.gate = parts[0].view({count, f, h});
  separate.up = parts[1].view({count, f, h});
  separate.down = parts[2].view({count, h, f});
  auto want = RunLocalExperts(xs, counts, separate);
  auto want_grad = torch::autograd::grad({want}, {plain}, {grad_y})[0];

  auto form = torch::empty_like(stored);
  expert_form::Write(stored, form, count);
  auto leaf = form.detach().requires_grad_(true);
  auto got = RunLocalExperts(xs, counts, expert_form::Views(leaf, 1, count, f, h));
  auto form_grad = torch::autograd::grad({got}, {leaf}, {grad_y})[0];
  torch::Tensor got_grad;
  expert_form::AddTo(got_grad, form_grad, count);

  EXPECT_TRUE(torch::allclose(got, want, 1e-12, 1e-13));
  EXPECT_TRUE(torch::allclose(got_grad, want_grad.to(torch::kFloat), 1e-6, 1e-7))
      << "max diff " << (got_grad - want_grad).abs().max().item<double>();
}

TEST_F(ExpertFormTest, RefusesBlocksThatAreNotThreeTimesCountMatrices) {
  auto block = torch::zeros({3 * 2 * 6 + 1}, kF64);
  EXPECT_THROW(expert_form::Part(block, 2, 0), c10::Error);
  EXPECT_THROW(expert_form::Part(torch::zeros({36}, kF64), 2, 3), c10::Error);
  EXPECT_THROW(expert_form::Views(torch::zeros({36}, kF64), 2, 2, 2, 3), c10::Error);
}

}  // namespace
}  // namespace trellis::train
