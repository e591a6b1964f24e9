// SwiGlu (swiglu.h) on CPU, its ATen path (part of model_test): the values
// and both gradients of torch::silu(a) * b, and bf16 rounded once from fp32.
#include "trainer_core/model/swiglu_op.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "trainer_core/model/model_test_util.h"

namespace trellis::train {
namespace {

using testing::FreshSeed;

struct Result {
  torch::Tensor h, grad_a, grad_b;
};

// h = f(a, b) and its gradients for grad_h, through autograd.
template <typename F>
Result WithGrads(F f, const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& grad_h) {
  auto la = a.detach().requires_grad_(true), lb = b.detach().requires_grad_(true);
  auto h = f(la, lb);
  auto g = torch::autograd::grad({h}, {la, lb}, {grad_h});
  return {h.detach(), g[0], g[1]};
}

torch::Tensor Plain(const torch::Tensor& a, const torch::Tensor& b) { return torch::silu(a) * b; }

// Gates across sigmoid's curve, and some where exp(-a) overflows (fp32 past
// ~88, fp64 past ~709) or underflows.
torch::Tensor Gates(at::IntArrayRef shape, torch::Dtype dtype) {
  auto a = torch::randn(shape, torch::TensorOptions().dtype(dtype)) * 4;
  auto flat = a.view({a.numel()});
  const std::vector<double> edges = {-800, -100, -89, 89, 100, 800};
  for (int64_t i = 0; i < flat.numel(); i += 5) flat[i] = edges[(i / 5) % edges.size()];
  return a;
}

TEST(SwiGluTest, MatchesSiluTimesUpAndItsGradients) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  // fp64 near exact; fp32 a few ulp apart (silu is a / (1 + e) in ATen, a * s here).
  for (auto [dtype, rtol, atol] :
       {std::tuple{torch::kDouble, 1e-12, 1e-13}, std::tuple{torch::kFloat, 1e-5, 1e-6}}) {
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{7, 5}, {1, 1}, {3, 4, 6}, {0, 4}, {64, 33}}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " " + c10::str(at::IntArrayRef(shape)));
      auto a = Gates(shape, dtype), b = torch::randn(shape, a.options());
      auto grad_h = torch::randn(shape, a.options());
      const Result got = WithGrads(SwiGlu, a, b, grad_h), want = WithGrads(Plain, a, b, grad_h);
      for (const auto& [name, g, w] :
           {std::tuple{"h", got.h, want.h}, std::tuple{"grad_a", got.grad_a, want.grad_a},
            std::tuple{"grad_b", got.grad_b, want.grad_b}}) {
        ASSERT_EQ(g.scalar_type(), dtype) << name;
        ASSERT_EQ(g.sizes(), w.sizes()) << name;
        EXPECT_FALSE(g.isnan().any().item<bool>()) << name;
        EXPECT_TRUE(torch::allclose(g, w, rtol, atol))
            << name << ": max diff " << (g - w).abs().max().item<double>();
      }
    }
  }
}

// Strided views (a transpose, a column slice) take the ATen path as they are.
TEST(SwiGluTest, TakesStridedViews) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  auto a = Gates({6, 9}, torch::kDouble).t(), b = torch::randn({9, 12}, f64).narrow(1, 2, 6);
  auto grad_h = torch::randn({9, 6}, f64);
  const Result got = WithGrads(SwiGlu, a, b, grad_h), want = WithGrads(Plain, a, b, grad_h);
  EXPECT_TRUE(torch::allclose(got.h, want.h, 1e-12, 1e-13));
  EXPECT_TRUE(torch::allclose(got.grad_a, want.grad_a, 1e-12, 1e-13));
  EXPECT_TRUE(torch::allclose(got.grad_b, want.grad_b, 1e-12, 1e-13));
}

// got (bf16) is want (fp32) rounded once: within half a bf16 ulp (2^-8 of the
// value), plus the few fp32 ulps by which the two orders of fp32 steps differ
// (absolute where grad_a crosses zero).
void ExpectRoundedOnce(const torch::Tensor& got, const torch::Tensor& want, const char* name) {
  ASSERT_EQ(got.scalar_type(), torch::kBFloat16) << name;
  auto w = want.to(torch::kDouble);
  auto diff = (got.to(torch::kDouble) - w).abs();
  auto bound = w.abs() * (1.0 / 256 + 1e-5) + 1e-6 * w.abs().max();
  EXPECT_TRUE((diff <= bound).all().item<bool>())
      << name << ": worst excess " << (diff - bound).max().item<double>();
}

TEST(SwiGluTest, Bf16IsFp32RoundedOnce) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  auto a = Gates({96, 40}, torch::kFloat).to(torch::kBFloat16);
  auto b = torch::randn({96, 40}).to(torch::kBFloat16);
  auto grad_h = torch::randn({96, 40}).to(torch::kBFloat16);
  const Result got = WithGrads(SwiGlu, a, b, grad_h);
  const auto f32 = torch::kFloat;
  const Result want = WithGrads(Plain, a.to(f32), b.to(f32), grad_h.to(f32));
  ExpectRoundedOnce(got.h, want.h, "h");
  ExpectRoundedOnce(got.grad_a, want.grad_a, "grad_a");
  ExpectRoundedOnce(got.grad_b, want.grad_b, "grad_b");
}

// Gate and up side by side in one [..., 2F] tensor (one GEMM's output):
// SwiGlu of the two halves, and ab's gradient is both halves' side by side.
TEST(SwiGluTest, PackedEqualsSwiGluOfTheHalves) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  for (auto dtype : {torch::kDouble, torch::kBFloat16}) {
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{7, 10}, {2, 3, 16}, {0, 8}}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " " + c10::str(at::IntArrayRef(shape)));
      const int64_t f = shape.back() / 2;
      auto ab = torch::cat({Gates(shape, torch::kDouble).narrow(-1, 0, f),
                            torch::randn(shape, torch::kDouble).narrow(-1, f, f)}, -1)
                    .to(dtype);
      auto out_shape = shape;
      out_shape.back() = f;
      auto grad_h = torch::randn(out_shape, torch::kDouble).to(dtype);
      auto leaf = ab.detach().requires_grad_(true);
      auto h = SwiGluPacked(leaf);
      auto grad_ab = torch::autograd::grad({h}, {leaf}, {grad_h})[0];
      const Result want = WithGrads(SwiGlu, ab.narrow(-1, 0, f), ab.narrow(-1, f, f), grad_h);
      // The same ATen steps on the same values: equal bits, in bf16 too.
      EXPECT_TRUE(torch::equal(h, want.h));
      EXPECT_TRUE(torch::equal(grad_ab, torch::cat({want.grad_a, want.grad_b}, -1)));
    }
  }
}

// On a GPU (built with kernels/): the packed kernels against the flat ones,
// which kernels/ tests against the host reference. Same steps per element:
// equal bits.
TEST(SwiGluTest, PackedKernelEqualsTheFlatOne) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  for (int64_t f : {768, 12}) {  // the vector path, and rows that are not 8-aligned
    auto ab = (torch::randn({257, 2 * f}) * 4).to(bf16);
    auto grad_h = torch::randn({257, f}).to(bf16);
    auto leaf = ab.detach().requires_grad_(true);
    auto h = SwiGluPacked(leaf);
    auto grad_ab = torch::autograd::grad({h}, {leaf}, {grad_h})[0];
    auto a = ab.narrow(1, 0, f).contiguous(), b = ab.narrow(1, f, f).contiguous();
    const Result want = WithGrads(SwiGlu, a, b, grad_h);
    EXPECT_TRUE(torch::equal(h, want.h)) << "f " << f;
    EXPECT_TRUE(torch::equal(grad_ab, torch::cat({want.grad_a, want.grad_b}, 1))) << "f " << f;
  }
}

TEST(SwiGluTest, RefusesInputsThatDoNotPair) {
  auto a = torch::randn({4, 3});
  EXPECT_THROW(SwiGlu(a, torch::randn({4, 2})), c10::Error);
  EXPECT_THROW(SwiGlu(a, torch::randn({4, 3}, torch::kDouble)), c10::Error);
  EXPECT_THROW(SwiGlu(torch::ones({4, 3}, torch::kLong), torch::ones({4, 3}, torch::kLong)),
               c10::Error);
  EXPECT_THROW(SwiGluPacked(torch::randn({4, 5})), c10::Error);  // no even split
  EXPECT_THROW(SwiGluPacked(torch::ones({4, 6}, torch::kLong)), c10::Error);
}

}  // namespace
}  // namespace trellis::train
