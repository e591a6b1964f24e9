// RmsNorm and AddRmsNorm (rms_norm.h, part of model_test): on CPU the ATen
// path against the formula in fp64; on a CUDA device the bf16 kernels against
// the same fp64 reference, values and every gradient, including a weight
// viewed off 16-byte alignment out of a flat buffer as the trainer's are.
#include "trainer_core/model/rms_norm_op.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "trainer_core/model/fusions.h"
#include "trainer_core/model/model_test_util.h"

namespace trellis::train {
namespace {

using testing::FreshSeed;

struct Grads {
  torch::Tensor y, normed, g_x, g_a, g_w;
};

// Forward and backward of AddRmsNorm (a defined) or RmsNorm, with upstream
// gradients g_y (residual stream) and g_n (normed) on fp64 copies or on the
// given tensors; the gradients come back as fp64 on the CPU.
Grads Run(bool fused_path, const torch::Tensor& x, const torch::Tensor& a,
          const torch::Tensor& w_flat, int64_t w_offset, const torch::Tensor& g_y,
          const torch::Tensor& g_n, double eps) {
  const int64_t h = x.size(-1);
  auto lx = x.detach().requires_grad_(true);
  auto la = a.defined() ? a.detach().requires_grad_(true) : a;
  auto lflat = w_flat.detach().requires_grad_(true);
  auto w = lflat.narrow(0, w_offset, h);
  Grads r;
  std::vector<torch::Tensor> outs, grads, inputs{lx, lflat};
  if (la.defined()) {
    auto res = fused_path ? AddRmsNorm(lx, la, w, eps) : ResidualNorm{lx + la, torch::Tensor()};
    if (!fused_path) {  // the formula, in the inputs' dtype (fp64 here)
      auto y = res.y;
      res.normed = y * torch::rsqrt(y.pow(2).mean(-1, true) + eps) * w;
    }
    r.y = res.y, r.normed = res.normed;
    outs = {res.y, res.normed}, grads = {g_y, g_n};
    inputs.push_back(la);
  } else {
    r.normed =
        fused_path ? RmsNorm(lx, w, eps) : lx * torch::rsqrt(lx.pow(2).mean(-1, true) + eps) * w;
    outs = {r.normed}, grads = {g_n};
  }
  auto g = torch::autograd::grad(outs, inputs, grads);
  auto cpu = [](const torch::Tensor& t) {
    return t.defined() ? t.detach().to(torch::kCPU, torch::kDouble) : t;
  };
  r.y = cpu(r.y), r.normed = cpu(r.normed), r.g_x = cpu(g[0]);
  r.g_w = cpu(g[1]).narrow(0, w_offset, h);
  if (la.defined()) r.g_a = cpu(g[2]);
  return r;
}

// max |got - want| / max |want|
double Err(const torch::Tensor& got, const torch::Tensor& want) {
  return (got - want).abs().max().item<double>() / want.abs().max().item<double>();
}

void ExpectClose(const Grads& got, const Grads& want, double tol, const std::string& what) {
  if (want.y.defined()) {
    EXPECT_LE(Err(got.y, want.y), tol) << what << ": y";
  }
  EXPECT_LE(Err(got.normed, want.normed), tol) << what << ": normed";
  EXPECT_LE(Err(got.g_x, want.g_x), tol) << what << ": x's gradient";
  if (want.g_a.defined()) {
    EXPECT_LE(Err(got.g_a, want.g_a), tol) << what << ": a's gradient";
  }
  EXPECT_LE(Err(got.g_w, want.g_w), tol) << what << ": the weight's gradient";
}

void CheckAgainstFp64(torch::Device device, torch::Dtype dtype, double tol) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  const double eps = 1e-5;
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{2, 37, 256}, {3, 5, 2048}, {1, 1, 64}, {4, 200}}) {
    const int64_t h = shape.back();
    const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
    auto x = torch::randn(shape, f64) * 2, a = torch::randn(shape, f64);
    auto flat = torch::randn({h + 11}, f64) * 0.5 + 1;
    auto g_y = torch::randn(shape, f64), g_n = torch::randn(shape, f64);
    for (bool add : {true, false}) {
      for (int64_t offset : {int64_t{0}, int64_t{3}}) {  // 3: the weight off 16-byte alignment
        auto on = [&](const torch::Tensor& t) { return t.to(device, dtype); };
        // The reference takes the rounded inputs, so that only the math differs.
        auto r = [&](const torch::Tensor& t) { return on(t).to(torch::kCPU, torch::kDouble); };
        const Grads want = Run(false, r(x), add ? r(a) : torch::Tensor(), r(flat), offset,
                               add ? r(g_y) : torch::Tensor(), r(g_n), eps);
        const Grads got = Run(true, on(x), add ? on(a) : torch::Tensor(), on(flat), offset,
                              add ? on(g_y) : torch::Tensor(), on(g_n), eps);
        ExpectClose(got, want, tol,
                    std::string(add ? "AddRmsNorm" : "RmsNorm") + " h " + std::to_string(h) +
                        " weight offset " + std::to_string(offset));
      }
    }
  }
}

TEST(RmsNormTest, AtenPathMatchesTheFormulaInFp64AndFp32) {
  CheckAgainstFp64(torch::kCPU, torch::kDouble, 1e-12);
  CheckAgainstFp64(torch::kCPU, torch::kFloat, 1e-5);
}

// bf16 outputs: within a few bf16 roundings of fp64 (2^-8 relative each).
TEST(RmsNormTest, CudaBf16MatchesFp64) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  ASSERT_TRUE(ActiveFusions().rms_norm) << "run without TRELLIS_FUSIONS_OFF=rms_norm";
  CheckAgainstFp64(torch::kCUDA, torch::kBFloat16, 2e-2);
}

}  // namespace
}  // namespace trellis::train
