// The head's chunked cross entropy (loss.h) and Model::Forward's loss (part of model_test).
#include "trainer_core/model/loss.h"

#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>  // the reference: LibTorch's own cross entropy

#include <cmath>
#include <random>
#include <vector>

#include "trainer_core/model/fusions.h"
#include "trainer_core/model/model.h"
#include "trainer_core/model/model_test_util.h"

namespace trellis::train {
namespace {

using testing::FreshSeed;
using testing::RandomBatch;
using testing::TinySpec;

namespace F = torch::nn::functional;

// Today's plain head loss: the whole logits, softmax in fp32 (fp64 for fp64).
torch::Tensor CeSumOfFullLogits(const torch::Tensor& x, const torch::Tensor& w,
                                const torch::Tensor& targets) {
  auto acc = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  return F::cross_entropy(torch::mm(x, w.t()).to(acc), targets,
                          F::CrossEntropyFuncOptions().ignore_index(-1).reduction(torch::kSum));
}

double RelativeError(const torch::Tensor& got, const torch::Tensor& want) {
  auto want64 = want.to(torch::kDouble);
  return (got.to(torch::kDouble) - want64).norm().item<double>() / want64.norm().item<double>();
}

TEST(LinearCrossEntropyTest, MatchesTheFullLogitsInFp64) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  const int64_t n = 10, h = 6, v = 7;
  auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  auto x = torch::randn({n, h}, f64).requires_grad_(true);
  auto w = (0.5 * torch::randn({v, h}, f64)).requires_grad_(true);
  auto targets = torch::randint(v, {n}, torch::kLong);
  targets[1] = -1;
  targets.narrow(0, 6, 3).fill_(-1);  // rows 6-8: with 3 rows a chunk, one predicts nothing
  const auto ref = CeSumOfFullLogits(x, w, targets);
  // An incoming gradient other than 1, as Model::Forward's division gives.
  const auto ref_grads = torch::autograd::grad({0.37 * ref}, {x, w});
  for (int64_t chunk : {int64_t{1}, int64_t{3}, n, n + 5}) {
    SCOPED_TRACE("chunk_rows=" + std::to_string(chunk));
    auto got = LinearCrossEntropySum(x, w, targets, chunk);
    EXPECT_EQ(got.dim(), 0);
    EXPECT_EQ(got.scalar_type(), torch::kDouble);
    EXPECT_NEAR(got.item<double>(), ref.item<double>(), 1e-12 * ref.item<double>());
    auto grads = torch::autograd::grad({0.37 * got}, {x, w});
    EXPECT_TRUE(torch::allclose(grads[0], ref_grads[0], 1e-10, 1e-13));
    EXPECT_TRUE(torch::allclose(grads[1], ref_grads[1], 1e-10, 1e-13));
    EXPECT_EQ(grads[0][1].abs().max().item<double>(), 0.0);  // an ignored row
  }
  // Only x requires a gradient.
  auto x_only = x.detach().requires_grad_(true);
  auto want = torch::autograd::grad({CeSumOfFullLogits(x_only, w.detach(), targets)}, {x_only});
  auto got =
      torch::autograd::grad({LinearCrossEntropySum(x_only, w.detach(), targets, 3)}, {x_only});
  EXPECT_TRUE(torch::allclose(got[0], want[0], 1e-10, 1e-13));
}

TEST(LinearCrossEntropyTest, WithoutGradientsComputesTheLossOnly) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  auto x = torch::randn({9, 5}, f64).requires_grad_(true);
  auto w = torch::randn({11, 5}, f64).requires_grad_(true);
  auto targets = torch::randint(11, {9}, torch::kLong);
  targets[4] = -1;
  const double want = CeSumOfFullLogits(x, w, targets).item<double>();
  {
    torch::NoGradGuard no_grad;
    auto got = LinearCrossEntropySum(x, w, targets, 4);
    EXPECT_FALSE(got.requires_grad());
    EXPECT_NEAR(got.item<double>(), want, 1e-12 * want);
  }
  auto got = LinearCrossEntropySum(x.detach(), w.detach(), targets, 2);
  EXPECT_FALSE(got.requires_grad());
  EXPECT_NEAR(got.item<double>(), want, 1e-12 * want);
}

// On CPU, and on a GPU where there is one (where the head's gradient is
// summed over chunks by GEMMs that accumulate into fp32, compat::AddMmIntoFp32).
TEST(LinearCrossEntropyTest, Bf16TracksTheFp32Reference) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  const int64_t n = 64, h = 32, v = 50;
  auto x = torch::randn({n, h}).requires_grad_(true);
  auto w = (0.2 * torch::randn({v, h})).requires_grad_(true);
  auto targets = torch::randint(v, {n}, torch::kLong);
  targets.narrow(0, 10, 5).fill_(-1);
  const auto ref = CeSumOfFullLogits(x, w, targets);
  const auto ref_grads = torch::autograd::grad({ref}, {x, w});

  std::vector<torch::Device> devices{torch::kCPU};
  if (torch::cuda::is_available()) devices.emplace_back(torch::kCUDA);
  for (const auto& device : devices) {
    SCOPED_TRACE(device.str());
    auto xb = x.detach().to(device, torch::kBFloat16).requires_grad_(true);
    auto wb = w.detach().to(device, torch::kBFloat16).requires_grad_(true);
    auto got = LinearCrossEntropySum(xb, wb, targets.to(device), 7);
    EXPECT_EQ(got.scalar_type(), torch::kFloat);
    // bf16 keeps 8 significant bits (relative rounding 2^-9) in the inputs, the
    // logits and the gradients.
    EXPECT_NEAR(got.item<double>(), ref.item<double>(), 1e-2 * ref.item<double>());
    auto grads = torch::autograd::grad({got}, {xb, wb});
    EXPECT_EQ(grads[0].scalar_type(), torch::kBFloat16);
    EXPECT_EQ(grads[1].scalar_type(), torch::kBFloat16);
    EXPECT_LT(RelativeError(grads[0].cpu(), ref_grads[0]), 2e-2);
    EXPECT_LT(RelativeError(grads[1].cpu(), ref_grads[1]), 2e-2);
  }
}

// The ce_kernel fusion against the ATen path, both bf16 on the GPU: the same
// loss to fp32 precision, gradients apart by at most a bf16 rounding of each
// p - onehot element (a vocabulary of 8-wide rows takes the vector accesses).
TEST(LinearCrossEntropyTest, CeKernelMatchesTheAtenPathOnTheGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here";
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  const int64_t n = 200, h = 64, v = 1024;
  auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  auto x = torch::randn({n, h}, bf16);
  auto w = 0.3 * torch::randn({v, h}, bf16);
  auto targets = torch::randint(v, {n}, bf16.dtype(torch::kLong));
  targets.narrow(0, 40, 7).fill_(-1);
  Fusions on, off;
  off.ce_kernel = false;
  std::vector<torch::Tensor> losses, grads;
  for (const Fusions& f : {on, off}) {
    auto xg = x.clone().requires_grad_(true), wg = w.clone().requires_grad_(true);
    losses.push_back(LinearCrossEntropySum(xg, wg, targets, 48, f));
    auto g = torch::autograd::grad({losses.back()}, {xg, wg});
    grads.insert(grads.end(), g.begin(), g.end());
  }
  EXPECT_NEAR(losses[0].item<double>(), losses[1].item<double>(),
              1e-5 * losses[1].item<double>());
  EXPECT_LT(RelativeError(grads[0], grads[2]), 4e-3);
  EXPECT_LT(RelativeError(grads[1], grads[3]), 4e-3);
  EXPECT_EQ(grads[0].narrow(0, 40, 7).abs().max().item<float>(), 0.0f);  // ignored rows
}

// Model::Forward divides the summed loss by the count of targets: that is
// cross_entropy's mean with ignore_index, except with no target at all,
// where the mean is 0/0 and the division gives 0.
TEST(ModelTest, SumOverTargetCountIsCrossEntropysMean) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  auto logits = torch::randn({12, 9}, torch::TensorOptions().dtype(torch::kDouble));
  auto targets = torch::randint(9, {12}, torch::kLong);
  targets.narrow(0, 3, 4).fill_(-1);
  const auto mean_options = F::CrossEntropyFuncOptions().ignore_index(-1);
  const auto sum_options = F::CrossEntropyFuncOptions().ignore_index(-1).reduction(torch::kSum);
  auto mean_of_ce = [&] { return F::cross_entropy(logits, targets, mean_options).item<double>(); };
  auto mean_by_count = [&] {
    auto sum = F::cross_entropy(logits, targets, sum_options);
    return sum / targets.ne(-1).sum().clamp_min(1);
  };
  const double mean = mean_of_ce();
  EXPECT_NEAR(mean_by_count().item<double>(), mean, 1e-14 * mean);
  targets.fill_(-1);
  EXPECT_TRUE(std::isnan(mean_of_ce()));
  EXPECT_EQ(mean_by_count().item<double>(), 0.0);
}

// The same loss and gradients with the head chunked or plain, including with
// no target at all (a zero loss and zero gradients, not NaN).
TEST(ModelTest, ChunkedCrossEntropyLeavesForwardUnchanged) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  Model model(TinySpec(), 8, seed, torch::kCPU, torch::kDouble);
  TokenBatch batch = RandomBatch(seed, 32);
  batch.targets[1][5] = -1;
  auto run = [&](const Fusions& fusions, ForwardResult* out) {
    model.ZeroGrad();
    *out = model.Forward(batch, torch::kDouble, 0.1, fusions);
    out->loss.backward();
    std::vector<torch::Tensor> grads;
    for (const auto& b : model.blocks()) grads.push_back(b.flat.grad().clone());
    return grads;
  };
  for (bool empty : {false, true}) {
    SCOPED_TRACE(empty ? "no targets" : "some targets");
    if (empty) batch.targets.fill_(-1);
    ForwardResult chunked, plain;
    auto chunked_grads = run(ParseFusionsOff(""), &chunked);
    auto plain_grads = run(ParseFusionsOff("chunked_ce"), &plain);
    const double ce = plain.ce.item<double>();
    EXPECT_EQ(chunked.ce.scalar_type(), torch::kDouble);
    EXPECT_NEAR(chunked.ce.item<double>(), ce, 1e-12 * ce);
    const double loss = plain.loss.item<double>();
    EXPECT_NEAR(chunked.loss.item<double>(), loss, 1e-12 * loss);
    if (empty) {
      EXPECT_EQ(ce, 0.0);
    }
    for (size_t i = 0; i < plain_grads.size(); ++i) {
      EXPECT_TRUE(torch::isfinite(chunked_grads[i]).all().item<bool>()) << "block " << i;
      EXPECT_TRUE(torch::allclose(chunked_grads[i], plain_grads[i], 1e-10, 1e-13)) << "block " << i;
    }
  }
}

}  // namespace
}  // namespace trellis::train
