#include "trainer_core/optim/optim.h"

#include <gtest/gtest.h>

#include <random>

#include "trainer_core/optim/schedule.h"

namespace trellis::train {
namespace {

uint64_t FreshSeed() {
  static std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

// The band the quintic maps normalized singular values in [lo, 1] into after
// `steps` iterations, found by iterating the scalar polynomial on a fine grid.
std::pair<double, double> QuinticBand(double lo, int steps) {
  double mn = 1e9, mx = 0;
  for (int i = 0; i <= 20000; ++i) {
    double x = std::pow(10.0, std::log10(lo) * (1 - i / 20000.0));
    for (int k = 0; k < steps; ++k) x = 3.4445 * x - 4.7750 * x * x * x + 2.0315 * std::pow(x, 5);
    mn = std::min(mn, x);
    mx = std::max(mx, x);
  }
  return {mn, mx};
}

// Random [batch, m, n] matrices with singular values log-uniform in
// [1e-2, 1] times a random scale (a spectrum NS is meant to flatten).
torch::Tensor RandomSpectrum(int64_t batch, int64_t m, int64_t n) {
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  const int64_t k = std::min(m, n);
  auto u = std::get<0>(torch::linalg_qr(torch::randn({batch, m, k}, opts)));
  auto v = std::get<0>(torch::linalg_qr(torch::randn({batch, n, k}, opts)));
  auto s = torch::pow(10.0, -2 * torch::rand({batch, 1, k}, opts)) * 7.5;
  return torch::matmul(u * s, v.transpose(-2, -1));
}

// Checks that `o` = U diag(d) V^T for the SVD of `g`, with d inside [lo, hi]:
// NS keeps the singular vectors and only reshapes the spectrum.
// Returns the band's lower edge.
double ExpectPolarInBand(const torch::Tensor& g, const torch::Tensor& o, double slack) {
  auto svd = torch::linalg_svd(g, /*full_matrices=*/false);
  auto u = std::get<0>(svd), s = std::get<1>(svd), vh = std::get<2>(svd);
  auto core =
      torch::matmul(torch::matmul(u.transpose(-2, -1), o.to(torch::kDouble)), vh.transpose(-2, -1));
  auto diag = core.diagonal(0, -2, -1);
  auto off = core - torch::diag_embed(diag);
  double lo = (s.amin(-1) / s.pow(2).sum(-1).sqrt()).min().item<double>();
  auto [band_lo, band_hi] = QuinticBand(lo, 5);
  EXPECT_GE(diag.min().item<double>(), band_lo - slack);
  EXPECT_LE(diag.max().item<double>(), band_hi + slack);
  EXPECT_LT(off.abs().max().item<double>(), slack + 1e-3);
  return band_lo;
}

TEST(NewtonSchulzTest, Fp32SingularValuesLandInTheQuinticBand) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  torch::manual_seed(seed);
  for (auto shape : {std::vector<int64_t>{1, 32, 16}, {1, 12, 40}, {6, 24, 24}}) {
    auto g = RandomSpectrum(shape[0], shape[1], shape[2]);
    double lo = ExpectPolarInBand(g, NewtonSchulz(g.to(torch::kFloat), 5, torch::kFloat), 1e-3);
    EXPECT_GT(lo, 0.6);  // the spectra stay where 5 steps suffice: a real band
  }
}

TEST(NewtonSchulzTest, Bf16StaysNearTheBand) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  torch::manual_seed(seed);
  auto g = RandomSpectrum(2, 16, 32);
  ExpectPolarInBand(g, NewtonSchulz(g.to(torch::kFloat), 5, torch::kBFloat16), 0.08);
}

TEST(NewtonSchulzTest, BatchedEqualsOneAtATime) {
  torch::manual_seed(FreshSeed());
  auto g = torch::randn({5, 8, 12});
  auto batched = NewtonSchulz(g, 5, torch::kFloat);
  for (int64_t e = 0; e < 5; ++e)
    EXPECT_TRUE(torch::allclose(batched[e], NewtonSchulz(g[e], 5, torch::kFloat), 1e-5, 1e-6));
}

spec::ModelSpec Tiny() {
  spec::ModelSpec m;
  m.layers = 1;
  m.hidden = 16;
  m.heads = 2;
  m.kv_heads = 1;
  m.experts = 3;
  m.expert_hidden = 24;
  m.vocab = 20;
  return m;
}

void RandomGrads(Model* model) {
  for (auto& b : model->blocks()) b.flat.mutable_grad().copy_(torch::randn_like(b.flat));
}

TEST(MuonTest, UpdatesFollowTheNesterovMomentumPolarFactor) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  torch::manual_seed(seed);
  Model model(Tiny(), 8, seed, torch::kCPU, torch::kDouble);
  const double lr = 0.01, mu = 0.95;
  Muon muon(SlotsFor(model.blocks(), Optim::kMuon), {mu, 5, torch::kDouble, /*wd=*/0});
  std::vector<torch::Tensor> first, before;
  RandomGrads(&model);
  for (const auto& p : SlotsFor(model.blocks(), Optim::kMuon)) first.push_back(p.Grad().clone());
  muon.Step(lr);
  RandomGrads(&model);
  auto slots = SlotsFor(model.blocks(), Optim::kMuon);
  for (const auto& p : slots) before.push_back(p.Value().clone());
  muon.Step(lr);
  for (size_t i = 0; i < slots.size(); ++i) {
    SCOPED_TRACE(slots[i].name);
    auto g = slots[i].Grad();
    auto nesterov = g + mu * (mu * first[i] + g);
    double rows = g.size(-2), cols = g.size(-1);
    auto step = (before[i] - slots[i].Value()) / (lr * std::sqrt(std::max(1.0, rows / cols)));
    ExpectPolarInBand(nesterov.dim() == 2 ? nesterov.unsqueeze(0) : nesterov,
                      step.dim() == 2 ? step.unsqueeze(0) : step, 1e-6);
  }
  EXPECT_GT(slots.size(), 5u);
}

TEST(AdamWTest, MatchesTheReferenceOverTwoSteps) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  torch::manual_seed(seed);
  Model model(Tiny(), 8, seed, torch::kCPU, torch::kDouble);
  const AdamWOptions o{0.9, 0.95, 1e-8, 0.1};
  AdamW adamw(SlotsFor(model.blocks(), Optim::kAdamW), o);
  auto slots = SlotsFor(model.blocks(), Optim::kAdamW);
  std::vector<torch::Tensor> p, m, v;
  for (const auto& s : slots) {
    p.push_back(s.Value().clone());
    m.push_back(torch::zeros_like(p.back()));
    v.push_back(torch::zeros_like(p.back()));
  }
  for (int t = 1; t <= 2; ++t) {
    const double lr = 0.01 * t;
    RandomGrads(&model);
    for (size_t i = 0; i < slots.size(); ++i) {
      auto g = slots[i].Grad();
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
      auto mhat = m[i] / (1 - std::pow(o.beta1, t)), vhat = v[i] / (1 - std::pow(o.beta2, t));
      double decay = slots[i].info.decay ? 1 - lr * o.weight_decay : 1;
      p[i] = p[i] * decay - lr * mhat / (vhat.sqrt() + o.eps);
    }
    adamw.Step(lr);
    for (size_t i = 0; i < slots.size(); ++i)
      EXPECT_TRUE(torch::allclose(slots[i].Value(), p[i], 1e-12, 1e-14)) << slots[i].name;
  }
}

TEST(ClipGradNormTest, ReturnsTheGlobalNormAndClipsToTheLimit) {
  torch::manual_seed(FreshSeed());
  Model model(Tiny(), 8, 1, torch::kCPU, torch::kDouble);
  RandomGrads(&model);
  double sq = 0;
  for (auto& b : model.blocks()) sq += b.flat.grad().pow(2).sum().item<double>();
  EXPECT_NEAR(ClipGradNorm(model.blocks(), 0), std::sqrt(sq), 1e-9 * std::sqrt(sq));
  EXPECT_NEAR(ClipGradNorm(model.blocks(), 1.5), std::sqrt(sq), 1e-9 * std::sqrt(sq));
  EXPECT_NEAR(ClipGradNorm(model.blocks(), 0), 1.5, 1e-5);
  EXPECT_NEAR(ClipGradNorm(model.blocks(), 10), 1.5, 1e-5);  // under the limit: untouched
}

TEST(ScheduleTest, WarmsUpLinearlyThenDecaysToTheFloor) {
  EXPECT_DOUBLE_EQ(LrScale(0, 10, 100, 0.1), 0.1);
  EXPECT_DOUBLE_EQ(LrScale(4, 10, 100, 0.1), 0.5);
  EXPECT_DOUBLE_EQ(LrScale(10, 10, 100, 0.1), 1.0);
  EXPECT_NEAR(LrScale(55, 10, 100, 0.1), 0.55, 1e-12);  // cosine midpoint
  EXPECT_NEAR(LrScale(100, 10, 100, 0.1), 0.1, 1e-12);
  EXPECT_NEAR(LrScale(500, 10, 100, 0.1), 0.1, 1e-12);
  for (int s = 11; s < 100; ++s) EXPECT_LT(LrScale(s, 10, 100, 0.1), LrScale(s - 1, 10, 100, 0.1));
  EXPECT_DOUBLE_EQ(LrScale(0, 0, 10, 0.0), 1.0);  // no warmup
}

}  // namespace
}  // namespace trellis::train
