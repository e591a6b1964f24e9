// The expert_wgrad fusion (expert_wgrad.h) against fp64 autograd on the CPU
// (part of model_test; GPU only, skipped elsewhere).
#include "trainer_core/model/expert_wgrad_op.h"

#include <gtest/gtest.h>

#include "trainer_core/model/layers.h"
#include "trainer_core/model/model_test_util.h"

namespace trellis::train {
namespace {

using testing::FreshSeed;

double RelError(const torch::Tensor& got, const torch::Tensor& want) {
  auto g = got.to(torch::kCPU, torch::kDouble), w = want.to(torch::kCPU, torch::kDouble);
  return ((g - w).norm() / w.norm()).item<double>();
}

struct Problem {
  torch::Tensor xs, counts, gate_up, down, grad_y;  // bf16 on the GPU; counts int64
};

Problem RandomProblem(int64_t experts, int64_t f, int64_t h) {
  auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  auto counts = torch::randint(0, 40, {experts}, torch::kLong);
  counts[1] = 0;  // an expert with no rows
  const int64_t rows = counts.sum().item<int64_t>();
  return {torch::randn({rows, h}, bf16), counts.to(torch::kCUDA),
          0.2 * torch::randn({experts, 2 * f, h}, bf16), 0.2 * torch::randn({experts, h, f}, bf16),
          torch::randn({rows, h}, bf16)};
}

// fp64 on the CPU, gate and up apart: y's input gradient and [gate, up, down]
// weight gradients.
std::vector<torch::Tensor> Fp64Reference(const Problem& p, int64_t f) {
  auto f64 = [](const torch::Tensor& t) { return t.to(torch::kCPU, torch::kDouble); };
  auto xs = f64(p.xs).requires_grad_(true);
  auto gate = f64(p.gate_up.narrow(1, 0, f)).requires_grad_(true);
  auto up = f64(p.gate_up.narrow(1, f, f)).requires_grad_(true);
  auto down = f64(p.down).requires_grad_(true);
  ExpertWeights w;
  w.gate = gate, w.up = up, w.down = down;
  auto y = RunLocalExperts(xs, p.counts.cpu(), w);
  return torch::autograd::grad({y}, {xs, gate, up, down}, {f64(p.grad_y)});
}

// Two micro-batches into one fp32 gradient in the trainer's stored layout
// [gate, up, down][E][F * H] (gate and up one strided batch per expert), and
// into parts in another order (gate after up: a call per part). The first
// micro-batch writes over NaN; the second adds.
TEST(ExpertWgradTest, SumsTheWeightGradientsOfMicroBatchesIntoFp32) {
  if (!ExpertWgradAvailable(torch::kCUDA, torch::kBFloat16)) {
    GTEST_SKIP() << "needs a CUDA device and a build with kernels/ and grouped GEMMs";
  }
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE("TRELLIS_TEST_SEED=" + std::to_string(seed));
  torch::manual_seed(seed);
  const int64_t experts = 5, f = 64, h = 96;
  auto fp32 = torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA);
  for (bool stored_order : {true, false}) {
    SCOPED_TRACE(stored_order ? "stored layout" : "gate after up");
    auto grad = torch::full({3, experts, f * h}, NAN, fp32);
    auto part = [&](int p) {
      const int slot = stored_order || p == 2 ? p : 1 - p;
      const int64_t rows = p == 2 ? h : f, cols = p == 2 ? f : h;
      return grad[slot].view({experts, rows, cols});
    };
    unsigned written = 0;
    std::vector<torch::Tensor> want(4);
    for (int micro = 0; micro < 2; ++micro) {
      const Problem p = RandomProblem(experts, f, h);
      ExpertWeights w;
      w.gate_up = p.gate_up, w.down = p.down;
      w.wgrad_into = [&](int q) {
        const bool first = (written >> q & 1) == 0;
        written |= 1u << q;
        return WgradTarget{part(q), first};
      };
      auto xs = p.xs.clone().requires_grad_(true);
      auto offs = p.counts.cumsum(0).to(torch::kInt);
      auto y = RunExpertsSummingWgrad(xs, p.counts, offs, w);
      auto dx = torch::autograd::grad({y}, {xs}, {p.grad_y})[0];
      const auto ref = Fp64Reference(p, f);
      EXPECT_LT(RelError(dx, ref[0]), 1e-2) << "micro-batch " << micro;
      for (int q = 0; q < 3; ++q) want[q] = micro == 0 ? ref[q + 1] : want[q] + ref[q + 1];
    }
    for (int q = 0; q < 3; ++q) {
      EXPECT_EQ(torch::isnan(part(q)).sum().item<int64_t>(), 0) << "part " << q;
      EXPECT_LT(RelError(part(q), want[q]), 1e-2) << "part " << q;
    }
    // The expert with no rows: its gradient is exactly zero.
    EXPECT_EQ(part(0)[1].abs().max().item<float>(), 0.0f);
  }
}

}  // namespace
}  // namespace trellis::train
